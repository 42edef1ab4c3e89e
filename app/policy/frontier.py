"""Pure selection maths over a frontier table: the best static setting, the noise margin, the per-range choice.

Rules (the engine-facing policy precomputes these once per table and caps):

* Best static: among settings measured *and safe* in every calibrated range, the highest geometric mean of
  median tok/s over the ranges. Geometric, so each context counts equally in relative terms; an arithmetic
  mean would let short contexts (highest tok/s) dominate. A setting missing or unsafe anywhere is not eligible:
  "static" means it can be held fixed at every context. Plain decoding stays the static setting unless the
  winner beats it by more than noise (its relative gain above the mean relative noise margin of the ranges, the
  margin below): plain needs no draft work, and a static chosen on a tie inside the noise becomes every class's
  fallback (seen on the shared CPU: lookup 3.04 vs plain 2.99 tok/s, spreads 0.5, made lookup the fallback and
  lost 10-27 % to plain on held-out prompts). Where a range has two or more prompts, the winner must also beat
  plain on prompts left out of its choice there (app.policy.held_out), else plain is the static setting.
* Noise margin of row R against the static row S in the same range:
  ``max(R.spread, S.spread, min_gain * S.median)``. Spreads are IQRs of the repeats; for normal noise the IQR is
  ~1.35 sigma, while the difference of two medians of 3-5 repeats has a standard error of ~0.75-0.95 sigma, so a
  gain above the larger IQR is ~1.4-1.8 standard errors: unlikely to be noise. Sample IQRs from so few repeats
  are themselves noisy (and 0 for one repeat), hence the relative floor (default 1%), which also ignores gains
  too small to matter. A row measured once has no spread of its own: it is charged the largest spread measured
  in its range (the machine's noise at that time), not 0. Otherwise a candidate the calibration ran once (its
  spread 0) cleared the margin on the 1% floor alone and could be chosen over a faster row measured twice whose
  honest spread happened to be large (seen on the shared CPU: structured@512 took n4,p0 at 3.71 tok/s, one
  run, over plain at 5.35 tok/s, two runs).
* Per-range choice: among safe rows whose median beats the range's baseline by more than their margin, the
  fastest; if there is none, the baseline. The baseline is the static setting, or plain decoding where plain's row
  is at least as fast as static's: a range (or a class) whose prompts the static setting slows has nothing to fall
  back on but plain, and a row must beat plain there to be worth its draft work. Seen on the shared CPU: code's
  prompts ran plain at 15.83 tok/s and the static setting (lookup) at 15.62; the draft model's 15.99 cleared the
  margin over lookup (+2.4 %) though not over plain (+1.0 %), was chosen, and ran code's held-out prompts at 0.92x
  plain. So DD is never measured slower than best static, nor than plain, in any calibrated range.
  Exact ties in median prefer the shallower draft (less work), then the label, so results are deterministic.
  Where the range has two or more prompts, the row must also win on prompts left out of its choice
  (app.policy.held_out), else the baseline runs ("fallback_held_out").
* Per class: a class's rows (content_class set) form its own frontier over its own ranges, chosen by the same
  rule against the same static setting (the one the context-only rows make best), measured on that class's
  prompts. Best static itself comes from the context-only rows only: they cover every calibrated range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from app.policy.held_out import HeldOut, cross_validate
from app.policy.stats import geomean
from app.policy.table import FrontierRow, FrontierTable
from app.speculative.settings import PLAIN, SpecSettings

DEFAULT_MIN_GAIN = 0.01
"""Relative floor of the noise margin: a row must beat static by more than 1% (and more than both IQRs)."""

Allowed = Callable[[SpecSettings], bool]
ChoiceReason = Literal["table_row", "fallback_static", "fallback_plain", "fallback_held_out"]


def _all(_: SpecSettings) -> bool:
    return True


def _speed_key(row: FrontierRow) -> tuple[float, int, str]:
    return (-row.median_tps, row.setting.n_max, row.setting.label())


@dataclass(frozen=True)
class StaticChoice:
    """The best static setting and its aggregate: geometric mean of median tok/s over all calibrated ranges."""

    setting: SpecSettings
    geomean_tps: float


@dataclass(frozen=True)
class RangeChoice:
    """What DD selects in one calibrated range, and the evidence.

    reason: "table_row" when the fastest eligible row is selected (possibly the static setting itself),
    "fallback_static" when a faster row existed but did not clear the noise margin, "fallback_plain" the same
    where plain decoding was the baseline (its row at least as fast as static's; module docstring),
    "fallback_held_out" when the row that cleared it did not win on prompts left out of its choice (held_out: the
    cross-validation's evidence, where the range has two or more prompts; app.policy.held_out).
    """

    ctx_lo: int
    ctx_hi: int
    selected: SpecSettings
    reason: ChoiceReason
    selected_row: FrontierRow | None
    static_row: FrontierRow | None
    fastest_row: FrontierRow | None
    margin_tps: float
    content_class: str | None = None
    held_out: HeldOut | None = None

    @property
    def is_static(self) -> bool:
        return self.static_row is not None and self.selected == self.static_row.setting

    @property
    def selected_tps(self) -> float | None:
        """The selected row's measured median tok/s (None when the selection has no row of its own)."""
        return self.selected_row.median_tps if self.selected_row is not None else None


def noise_margin(
    row: FrontierRow, static_row: FrontierRow, min_gain: float = DEFAULT_MIN_GAIN, unknown_spread: float = 0.0
) -> float:
    """How much faster than the static row `row` must be (tok/s) before DD trusts the difference; `unknown_spread`
    stands in for the spread of a row measured only once (see the module docstring)."""
    return max(_spread(row, unknown_spread), _spread(static_row, unknown_spread), min_gain * static_row.median_tps)


def _spread(row: FrontierRow, unknown: float) -> float:
    return row.spread_tps if row.repeats >= 2 else max(row.spread_tps, unknown)


def range_noise(rows: list[FrontierRow]) -> float:
    """The largest spread measured (two or more repeats) among one range's rows: a once-measured row's stand-in."""
    return max((r.spread_tps for r in rows if r.repeats >= 2), default=0.0)


def best_static(
    table: FrontierTable, allowed: Allowed = _all, min_gain: float = DEFAULT_MIN_GAIN
) -> StaticChoice | None:
    """The one setting that, held fixed at every calibrated range, does best overall (None if none qualifies);
    plain decoding unless the winner beats it beyond noise (module docstring)."""
    n_ranges = len(table.ranges)
    per_setting: dict[SpecSettings, list[float]] = {}
    by_range: dict[tuple[int, int], list[FrontierRow]] = {}
    for r in table.context_rows:
        by_range.setdefault(r.context, []).append(r)
        if r.safe and allowed(r.setting):
            per_setting.setdefault(r.setting, []).append(r.median_tps)
    scored = [(geomean(v), s) for s, v in per_setting.items() if len(v) == n_ranges]
    if not scored:
        return None
    score, setting = min(scored, key=lambda t: (-t[0], t[1].n_max, t[1].label()))
    plain = next((g for g, s in scored if s == PLAIN), None)
    if setting != PLAIN and plain:
        noise = []
        for rows in by_range.values():
            row = next(r for r in rows if r.setting == setting and r.safe)
            base = next(r for r in rows if r.setting == PLAIN and r.safe)
            noise.append(noise_margin(row, base, min_gain, range_noise(rows)) / base.median_tps)
            check = cross_validate([base, row], base, noise[-1])
            if check is not None and not check.holds:  # it loses to plain on a prompt left out (app.policy.held_out)
                return StaticChoice(setting=PLAIN, geomean_tps=plain)
        if score / plain - 1.0 <= sum(noise) / len(noise):
            return StaticChoice(setting=PLAIN, geomean_tps=plain)
    return StaticChoice(setting=setting, geomean_tps=score)


def choose_in_range(
    rows: list[FrontierRow],
    ctx: tuple[int, int],
    static: SpecSettings | None,
    min_gain: float = DEFAULT_MIN_GAIN,
    allowed: Allowed = _all,
) -> RangeChoice:
    """Apply the per-range rule to the rows of one range (see the module docstring)."""
    safe = sorted((r for r in rows if r.safe and allowed(r.setting)), key=_speed_key)
    fastest = safe[0] if safe else None
    unknown = range_noise(rows)  # noise is the machine's: unsafe rows measured it too
    static_row = next((r for r in safe if r.setting == static), None) if static is not None else None
    if static_row is None:
        # No static baseline (no setting is safe in every range under these caps): take the fastest safe row here;
        # if nothing here is safe, plain decoding, the engine's baseline, which needs no draft allocation.
        if fastest is not None:
            return RangeChoice(ctx[0], ctx[1], fastest.setting, "table_row", fastest, None, fastest, 0.0)
        plain_row = next((r for r in rows if r.setting == PLAIN and r.safe), None)
        return RangeChoice(ctx[0], ctx[1], PLAIN, "fallback_static", plain_row, None, None, 0.0)
    plain_row = next((r for r in safe if r.setting == PLAIN), None)
    base = plain_row if plain_row is not None and plain_row.median_tps >= static_row.median_tps else static_row
    for r in safe:
        if r is base:
            break  # every remaining row is no faster than the baseline
        margin = noise_margin(r, base, min_gain, unknown)
        if r.median_tps - base.median_tps > margin:
            check = cross_validate(safe, base, margin / base.median_tps)
            if check is not None and not check.holds:
                return RangeChoice(
                    ctx[0], ctx[1], base.setting, "fallback_held_out", base, static_row, fastest, margin, None, check
                )
            return RangeChoice(ctx[0], ctx[1], r.setting, "table_row", r, static_row, fastest, margin, None, check)
    reason: ChoiceReason = "table_row"
    if fastest is not base:
        reason = "fallback_static" if base is static_row else "fallback_plain"
    margin = noise_margin(fastest, base, min_gain, unknown) if fastest is not None else 0.0
    check = cross_validate(safe, base, margin / base.median_tps)  # the evidence, for the report
    return RangeChoice(ctx[0], ctx[1], base.setting, reason, base, static_row, fastest, margin, None, check)


def frontier_choices(
    table: FrontierTable, min_gain: float = DEFAULT_MIN_GAIN, allowed: Allowed = _all
) -> tuple[StaticChoice | None, list[RangeChoice]]:
    """The best static setting and the DD choice for every calibrated context-only range, in range order."""
    static = best_static(table, allowed, min_gain)
    setting = static.setting if static else None
    return static, _choices(table, None, table.ranges, setting, min_gain, allowed)


def class_choices(
    table: FrontierTable, static: StaticChoice | None, min_gain: float = DEFAULT_MIN_GAIN, allowed: Allowed = _all
) -> dict[str, list[RangeChoice]]:
    """Per class with rows: its choice in each of its ranges, against the table's best static setting."""
    setting = static.setting if static else None
    return {c: _choices(table, c, rngs, setting, min_gain, allowed) for c, rngs in table.class_ranges.items()}


def _choices(
    table: FrontierTable,
    content_class: str | None,
    ranges: tuple[tuple[int, int], ...],
    static: SpecSettings | None,
    min_gain: float,
    allowed: Allowed,
) -> list[RangeChoice]:
    by_range: dict[tuple[int, int], list[FrontierRow]] = {}
    for r in table.rows:
        if r.content_class == content_class:
            by_range.setdefault(r.context, []).append(r)
    out = [choose_in_range(by_range[c], c, static, min_gain, allowed) for c in ranges]
    return out if content_class is None else [replace(c, content_class=content_class) for c in out]
