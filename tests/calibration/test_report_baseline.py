"""The static-vs-DD report compares against a setting the table measured: the draft model's n2,p0, else the MTP
head's (a model with an MTP head and no draft), else the best static row; never an unmeasured one (gains "n/a")."""

from __future__ import annotations

from app.calibration.runner import report_baseline, report_rows
from app.speculative.settings import PLAIN, SpecSettings
from tests.policy.helpers import make_table

MTP2 = SpecSettings("mtp", 2, 0, 0.0)
MTP4 = SpecSettings("mtp", 4, 0, 0.25)
POOL = SpecSettings("pool", 16, 0, 0.0, cost_stop=True)
POINTS = [512, 2048]


def test_an_mtp_only_table_is_compared_with_the_heads_n2_and_shows_real_gains() -> None:
    table = make_table({PLAIN: [50.0, 45.0], MTP2: [70.0, 60.0], MTP4: [80.0, 58.0], POOL: [75.0, 66.0]}, POINTS)
    assert report_baseline(table) == MTP2
    rows = report_rows(table)
    assert rows and all(r.static_setting == MTP2 and r.static_tps is not None for r in rows)
    assert all(r.gain is not None for r in rows)  # before: against the draft model's n2,p0, never measured: n/a
    assert rows[0].dd_setting == MTP4 and abs(rows[0].gain - (80.0 / 70.0 - 1.0)) < 1e-9


def test_the_draft_models_n2_comes_first_and_a_table_with_neither_uses_its_best_static_row() -> None:
    n2 = SpecSettings("draft", 2, 0, 0.0)
    assert report_baseline(make_table({PLAIN: [50.0, 45.0], n2: [60.0, 50.0], MTP2: [70.0, 60.0]}, POINTS)) == n2
    lookup_only = make_table({PLAIN: [50.0, 45.0], SpecSettings("lookup", 8): [55.0, 44.0]}, POINTS)
    assert report_baseline(lookup_only) is None
    assert all(r.static_tps is not None for r in report_rows(lookup_only))
