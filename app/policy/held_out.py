"""Cross-validation of a range's choice over its prompts: does the row chosen without a prompt win on that prompt?

A row that beats the baseline on a range's prompts taken together may win on one of them only (seen on the CPUs
here: rows that won on the calibration corpus and lost on held-out prompts, DD at 0.88-0.97x plain). Where the
calibration measured two or more prompts in a range (``FrontierRow.prompt_tps``), each prompt is left out in turn:
the choice is made on the others by the same rule (the fastest row by geometric mean of its per-prompt ratios to
the baseline, if that ratio clears the noise margin, else the baseline) and scored on the prompt left out. The
range's choice is kept only if those held-out scores, together, beat the baseline by more than the noise margin;
else the baseline runs (reason ``fallback_held_out``). A range with one prompt has nothing to hold out (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.policy.stats import geomean
from app.policy.table import FrontierRow


@dataclass(frozen=True)
class HeldOut:
    """The evidence of one range's leave-one-prompt-out check.

    prompts: how many prompts (folds); supported: on how many of them the choice made without that prompt beat
    the baseline by more than the margin; gain: the relative gain over the baseline on the held-out prompts
    (geometric mean; a fold that chose the baseline counts 0); margin: the relative noise margin the gain must
    clear; holds: it did.
    """

    prompts: int
    supported: int
    gain: float
    margin: float

    @property
    def holds(self) -> bool:
        return self.gain > self.margin

    def describe(self) -> str:
        """One line for reports: 'won 2 of 3 held out, +4.1% (margin 2.0%)'."""
        return f"won {self.supported} of {self.prompts} held out, {self.gain:+.1%} (margin {self.margin:.1%})"


def cross_validate(rows: Sequence[FrontierRow], base: FrontierRow, margin: float) -> HeldOut | None:
    """Leave-one-prompt-out over the rows of one range (safe, allowed, the baseline among them) against `base`,
    with `margin` the relative noise margin (module docstring). None where fewer than two prompts were measured on
    the baseline, or no other row has a value on each of them."""
    n = len(base.prompt_tps)
    rivals = [r for r in rows if r is not base and len(r.prompt_tps) == n]
    if n < 2 or not rivals:
        return None
    gains = []
    for k in range(n):
        kept = [j for j in range(n) if j != k]

        def ratio(row: FrontierRow, kept: list[int] = kept) -> float:
            return geomean([row.prompt_tps[j] / base.prompt_tps[j] for j in kept])

        best = max(rivals, key=lambda r: (ratio(r), -r.setting.n_max))
        gains.append(best.prompt_tps[k] / base.prompt_tps[k] - 1.0 if ratio(best) - 1.0 > margin else 0.0)
    supported = sum(g > margin for g in gains)
    return HeldOut(n, supported, geomean([1.0 + g for g in gains]) - 1.0, margin)
