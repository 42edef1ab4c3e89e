"""Static-vs-Dynamic-Draft comparison rows for a frontier table, with Markdown and CSV renderers.

One row per calibrated range: the fixed static setting's measured tok/s next to what DD selects there, in the
seed's shape (Context | Static fixed setting | Static TG | DD-selected setting | DD TG | Gain vs static). A table
with content classes adds one row per (class, range) of each class's own frontier, measured on that class's
prompts; the Markdown then leads with a Class column ("any" for the context-only rows), the CSV ends with one.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from app.policy.frontier import DEFAULT_MIN_GAIN, RangeChoice, class_choices, frontier_choices
from app.policy.held_out import HeldOut
from app.policy.table import FrontierTable, normalize
from app.speculative.settings import PLAIN, SpecSettings

COLUMNS = ("Context", "Static fixed setting", "Static TG", "DD-selected setting", "DD TG", "Gain vs static")
HELD_OUT_COLUMN = "Held-out vs baseline"


@dataclass(frozen=True)
class ComparisonRow:
    """One calibrated range: static fixed setting vs the DD selection; tok/s are None where not measured/safe.

    gain: dd_tps / static_tps - 1, None when either is missing; tie: DD selects the fixed setting itself;
    held_out: how the choice fared on prompts left out of it (app.policy.held_out), None with one prompt.
    """

    ctx_lo: int
    ctx_hi: int
    context: str
    static_setting: SpecSettings
    static_tps: float | None
    dd_setting: SpecSettings
    dd_tps: float | None
    gain: float | None
    tie: bool
    content_class: str | None = None
    held_out: HeldOut | None = None  # the range's cross-validation over its prompts, where it has two or more

    @property
    def gain_label(self) -> str:
        if self.tie:
            return "tie"
        return "n/a" if self.gain is None else f"{self.gain * 100:+.1f}%"


def context_label(ctx_lo: int, ctx_hi: int, prompt_tokens: int | None) -> str:
    """Label a range: "64k" for an exact multiple of 1024 tokens, "~4k" for 3946, else the range itself."""
    if prompt_tokens is None:
        return f"{ctx_lo}-{ctx_hi - 1}"
    if prompt_tokens < 1024:
        return str(prompt_tokens)
    if prompt_tokens % 1024 == 0:
        return f"{prompt_tokens // 1024}k"
    return f"~{round(prompt_tokens / 1024)}k"


def comparison_rows(
    table: FrontierTable, fixed: SpecSettings | None = None, min_gain: float = DEFAULT_MIN_GAIN
) -> list[ComparisonRow]:
    """The comparison per calibrated context-only range; `fixed` defaults to the table's best static setting (else
    plain)."""
    static, choices = frontier_choices(table, min_gain)
    fixed_setting = normalize(fixed) if fixed is not None else (static.setting if static else PLAIN)
    return [_compare(table, c, fixed_setting) for c in choices]


def class_comparison_rows(
    table: FrontierTable, fixed: SpecSettings | None = None, min_gain: float = DEFAULT_MIN_GAIN
) -> list[ComparisonRow]:
    """The comparison per (class, range) of the class frontiers, in TABLE_CLASSES order (classes, then
    sub-classes); static tok/s is the fixed setting's row measured on that class's prompts."""
    static, _ = frontier_choices(table, min_gain)
    fixed_setting = normalize(fixed) if fixed is not None else (static.setting if static else PLAIN)
    return [_compare(table, c, fixed_setting) for cs in class_choices(table, static, min_gain).values() for c in cs]


def _compare(table: FrontierTable, c: RangeChoice, fixed_setting: SpecSettings) -> ComparisonRow:
    rows = table.rows_in((c.ctx_lo, c.ctx_hi), c.content_class)
    by_setting = {r.setting: r for r in rows if r.safe}
    fixed_row = by_setting.get(fixed_setting)
    dd_row = by_setting.get(c.selected)
    points = [r.prompt_tokens for r in rows if r.prompt_tokens is not None]
    point = max(set(points), key=points.count) if points else None
    s_tps = fixed_row.median_tps if fixed_row else None
    d_tps = dd_row.median_tps if dd_row else None
    gain = d_tps / s_tps - 1.0 if s_tps and d_tps is not None else None
    return ComparisonRow(
        ctx_lo=c.ctx_lo,
        ctx_hi=c.ctx_hi,
        context=context_label(c.ctx_lo, c.ctx_hi, point),
        static_setting=fixed_setting,
        static_tps=s_tps,
        dd_setting=c.selected,
        dd_tps=d_tps,
        gain=gain,
        tie=c.selected == fixed_setting,
        content_class=c.content_class,
        held_out=c.held_out,
    )


def _tps(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f} tok/s"


def has_classes(rows: list[ComparisonRow]) -> bool:
    return any(r.content_class is not None for r in rows)


def has_held_out(rows: list[ComparisonRow]) -> bool:
    return any(r.held_out is not None for r in rows)


def display_columns(rows: list[ComparisonRow]) -> tuple[str, ...]:
    """The column titles for `rows`: the seed's, led by "Class" when some row belongs to a class, ended by
    "Held-out" when some range was cross-validated over its prompts."""
    head = ("Class", *COLUMNS) if has_classes(rows) else COLUMNS
    return (*head, HELD_OUT_COLUMN) if has_held_out(rows) else head


def display_cells(r: ComparisonRow, with_class: bool = False, with_held_out: bool = False) -> tuple[str, ...]:
    """One row as the text of the columns (Markdown report and the app's table share it)."""
    cells = (r.context, r.static_setting.label(), _tps(r.static_tps), r.dd_setting.label(), _tps(r.dd_tps))
    tail = (r.held_out.describe() if r.held_out else "one prompt",) if with_held_out else ()
    return ((r.content_class or "any",) if with_class else ()) + (*cells, r.gain_label, *tail)


def to_markdown(rows: list[ComparisonRow]) -> str:
    """A Markdown table in the seed's layout (with a leading Class column when some row belongs to a class, and
    a trailing Held-out column when some range was cross-validated)."""
    columns = display_columns(rows)
    with_class, with_held_out = has_classes(rows), has_held_out(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(display_cells(r, with_class, with_held_out)) + " |")
    return "\n".join(lines) + "\n"


def to_csv(rows: list[ComparisonRow]) -> str:
    """CSV with the seed's columns (numbers without units, gain in percent) plus the range bounds, the class and the
    cross-validation's prompts, prompts won and held-out gain in percent (empty where the range had one prompt)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow((*COLUMNS, "ctx_lo", "ctx_hi", "class", "held_out_prompts", "held_out_supported", "held_out_gain"))
    for r in rows:
        h = r.held_out
        w.writerow(
            (
                r.context,
                r.static_setting.label(),
                "" if r.static_tps is None else f"{r.static_tps:.2f}",
                r.dd_setting.label(),
                "" if r.dd_tps is None else f"{r.dd_tps:.2f}",
                "tie" if r.tie else ("" if r.gain is None else f"{r.gain * 100:.1f}"),
                r.ctx_lo,
                r.ctx_hi,
                r.content_class or "",
                *((h.prompts, h.supported, f"{h.gain * 100:.1f}") if h else ("", "", "")),
            )
        )
    return buf.getvalue()
