"""Dynamic Draft: the calibrated frontier table, per-request selection, overrides and decision records (no Qt)."""

from app.policy.dynamic import REASONS, DecisionRecord, DraftCaps, DynamicDraftPolicy, Reason
from app.policy.fingerprint import Fingerprint
from app.policy.frontier import DEFAULT_MIN_GAIN, RangeChoice, StaticChoice, best_static, frontier_choices
from app.policy.report import ComparisonRow, comparison_rows, to_csv, to_markdown
from app.policy.store import LoadResult, TableEntry, TableStore
from app.policy.table import (
    SCHEMA_VERSION,
    FrontierRow,
    FrontierTable,
    Measurement,
    build_rows,
    new_table,
    ranges_from_points,
)

__all__ = [
    "DEFAULT_MIN_GAIN",
    "REASONS",
    "SCHEMA_VERSION",
    "ComparisonRow",
    "DecisionRecord",
    "DraftCaps",
    "DynamicDraftPolicy",
    "Fingerprint",
    "FrontierRow",
    "FrontierTable",
    "LoadResult",
    "Measurement",
    "RangeChoice",
    "Reason",
    "StaticChoice",
    "TableEntry",
    "TableStore",
    "best_static",
    "build_rows",
    "comparison_rows",
    "frontier_choices",
    "new_table",
    "ranges_from_points",
    "to_csv",
    "to_markdown",
]
