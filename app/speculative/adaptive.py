"""Adaptive draft length and the cost stop, driven by measured acceptance and measured cost (the pool: pool.py).

Both layers optimise the same quantity: expected tokens emitted per millisecond of a step. For a draft of length k
with conditional acceptance a_i at position i (the chance token i is accepted given the earlier ones were), a step
emits E(k) = 1 + sum_{j<=k} prod_{i<=j} a_i tokens (the target always adds one of its own) and costs
draft_ms(k) + verify_ms(k). Acceptance is tracked per position as an exponential moving average (EMA) — the
"EMA of per-position acceptance" design — so the length follows acceptance within a few steps when the text turns
from boilerplate to free prose. The costs are measured too, per verify batch size, so the same code pays for depth
on a GPU (where verifying 8 tokens costs little more than 1) and refuses it on a small CPU (where it costs ~8x).
Inside a draft, the draft model's own p_min confidence stop still applies; the controller sets the ceiling. The
cost stop (`cost_stop_step`) replaces a fixed p_min with floors derived from the same measured costs: the draft goes
one token deeper only while the chance that all its tokens so far are accepted pays for the extra verify row and
draft token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

EMA_ALPHA = 0.15  # ~7-step memory: fast enough to follow a change of content, slow enough to ignore one miss
PRIOR_ACCEPT = 0.6  # optimistic start so depth gets tried before evidence exists
MAX_POSITIONS = 64
WARMUP_PULLS = 3


@dataclass
class CostModel:
    """Measured milliseconds: verify time per batch size, and draft time per drafted token (EMAs)."""

    verify_ms: dict[int, float] = field(default_factory=dict)  # batch size (1 + drafted) -> EMA ms
    draft_ms_per_token: float | None = None
    prior_verify_growth: float = 0.25  # before measuring, assume each extra verified token costs +25% of one

    def observe(self, drafted: int, draft_ms: float, verify_ms: float, draft_sample: bool = True) -> None:
        """Learn one step's verify ms, and its draft ms per token unless not `draft_sample` (see SourcePool.observe)."""
        b = drafted + 1
        old = self.verify_ms.get(b)
        self.verify_ms[b] = verify_ms if old is None else old + EMA_ALPHA * (verify_ms - old)
        if drafted > 0 and draft_sample:
            per = draft_ms / drafted
            d = self.draft_ms_per_token
            self.draft_ms_per_token = per if d is None else d + EMA_ALPHA * (per - d)

    def table(self) -> dict[int, float]:
        """The measured verify ms per batch size under a monotone envelope: no size costs more than a larger one was
        measured to cost (a noisy or one-off sample must not make depth look dearer than it is)."""
        out: dict[int, float] = {}
        cap = math.inf
        for b in sorted(self.verify_ms, reverse=True):
            cap = min(cap, self.verify_ms[b])
            out[b] = cap
        return dict(sorted(out.items()))

    def verify(self, k: int) -> float:
        """Estimated verify ms for a draft of k tokens: measured (under the envelope), else interpolated, else the
        prior; below the smallest measured batch it scales by rows (never negative)."""
        b = k + 1
        table = self.table()
        if b in table:
            return table[b]
        known = list(table)
        if not known:
            return 1.0 + self.prior_verify_growth * k
        lo = [x for x in known if x < b]
        hi = [x for x in known if x > b]
        if lo and hi:
            x0, x1 = lo[-1], hi[0]
            y0, y1 = table[x0], table[x1]
            return y0 + (y1 - y0) * (b - x0) / (x1 - x0)
        if hi:  # below the smallest measured size
            return table[hi[0]] * b / hi[0]
        if len(known) >= 2:  # extrapolate with the measured slope, never below flat
            x0, x1 = known[-2], known[-1]
            slope = max(0.0, (table[x1] - table[x0]) / (x1 - x0))
            return table[x1] + slope * (b - x1)
        return table[known[0]] * (1.0 + self.prior_verify_growth * (b - known[0]))

    def stop_floors(self, n: int) -> list[float]:
        """The cost stop's floors for a draft of up to n tokens, in units of one target decode: floor[i] is what
        drafting token i+1 costs (one more verify row and one more draft token), (verify(i+2 rows) - verify(i+1
        rows) + draft per token) / verify(1 row). Drafting goes on while the chance that every token so far is
        accepted is at least the floor. Batch sizes are learnt one at a time: the first unmeasured size gets an
        optimistic estimate (verify()'s), every size beyond it floor inf, so depth grows as sizes get measured."""
        first_unmeasured = next(b for b in range(1, len(self.verify_ms) + 2) if b not in self.verify_ms)
        one = max(self.verify(0), 1e-9)
        per_token = self.draft_ms_per_token or 0.0
        floors = []
        for i in range(n):
            rows = i + 2  # the verify batch once token i+1 is drafted
            if rows > first_unmeasured:
                floors.append(math.inf)
            else:
                floors.append((self.verify(rows - 1) - self.verify(rows - 2) + per_token) / one)
        return floors

    def draft(self, k: int) -> float:
        return 0.0 if k == 0 else k * (self.draft_ms_per_token if self.draft_ms_per_token is not None else 0.0)

    def step(self, k: int) -> float:
        """Estimated ms of a whole step with a k-token draft: drafting it, then verifying it (never 0)."""
        return max(self.verify(k) + self.draft(k), 1e-9)


@dataclass
class AcceptanceModel:
    """EMA of conditional acceptance per draft position."""

    rates: list[float] = field(default_factory=lambda: [PRIOR_ACCEPT] * MAX_POSITIONS)
    seen: list[bool] = field(default_factory=lambda: [False] * MAX_POSITIONS)

    def observe(self, drafted: int, accepted: int) -> None:
        # Positions up to the first rejection were tested: accepted ones count 1, the rejected one 0.
        for i in range(min(drafted, accepted + 1)):
            self.observe_at(i, i < accepted)

    def observe_at(self, i: int, hit: bool) -> None:
        """One tested position i (every earlier one accepted): hit, or rejected."""
        if i >= MAX_POSITIONS:
            return
        if not self.seen[i]:
            # Start an untested position from its neighbour's estimate, not the prior (see rate()).
            self.rates[i] = self.rate(i)
            self.seen[i] = True
        self.rates[i] += EMA_ALPHA * ((1.0 if hit else 0.0) - self.rates[i])

    def observe_declined(self, drafted: int, accepted: int, declined: int) -> None:
        """A draft the cost stop cut short: its drafted positions are learnt as usual, the `declined` ones after them
        were never drafted, so they are not tested (not a rejection, and no evidence either way)."""
        del declined  # named so callers say what the stop did; positions past `drafted` were simply not tested
        self.observe(drafted, accepted)

    def rate(self, i: int) -> float:
        """Conditional acceptance at position i; an untested position borrows the deepest tested one's estimate
        (optimism under uncertainty: after five straight accepts, the sixth is likely too, so depth gets tried)."""
        if self.seen[i] or i == 0:
            return self.rates[i]
        j = i - 1
        while j > 0 and not self.seen[j]:
            j -= 1
        return self.rates[j]

    def expected_tokens(self, k: int) -> float:
        """1 (the target's own token) + expected accepted tokens of a k-token draft."""
        total, run = 1.0, 1.0
        for i in range(min(k, MAX_POSITIONS)):
            run *= self.rate(i)
            total += run
        return total


def best_rate(
    acc: AcceptanceModel, cost: CostModel, n_min: int, n_max: int, allow_zero: bool = True
) -> tuple[int, float]:
    """(length, expected tokens per ms) of the best draft length in {0} ∪ [n_min, n_max] (without 0 when not
    `allow_zero`)."""
    lo = max(n_min, 1)
    lengths = [*([0] if allow_zero or lo > n_max else []), *range(lo, n_max + 1)]
    best_k, best = 0, 0.0
    for k in lengths:  # k = 0 is a plain step: 1 token for one decode, no draft
        rate = acc.expected_tokens(k) / cost.step(k)
        if k == lengths[0] or rate > best * 1.0001:
            best_k, best = k, rate
    return best_k, best


def cost_stop_step(costs: CostModel, depth: int, asked: int) -> tuple[int, list[float]]:
    """The cost stop's (depth ceiling, floors) for one step: `depth` is what the step's controller allows (0: a
    plain step, e.g. the adaptive length's answer), `asked` the deepest draft the request and the context allow.
    The ceiling ends at the first floor above 1 (inf for a batch size not learnt yet), which no chance can reach.
    The engine (Session) and bench/lib/simulate.py both step through here."""
    if depth <= 0 or asked <= 0:
        return 0, []
    floors = costs.stop_floors(asked)
    ceiling = certain_depth(floors)
    return ceiling, floors[:ceiling]


def certain_depth(floors: Sequence[float]) -> int:
    """How deep the cost stop lets a draft of certain tokens go: up to the first floor above 1 (no chance reaches
    it), which is where prompt lookup's tokens, counted as certain, stop."""
    return next((i for i, f in enumerate(floors) if f > 1.0), len(floors))


def best_length(acc: AcceptanceModel, cost: CostModel, n_min: int, n_max: int, allow_zero: bool = True) -> int:
    """The draft length in {0} ∪ [n_min, n_max] (without 0 when not `allow_zero`) with the most expected tokens per
    ms."""
    return best_rate(acc, cost, n_min, n_max, allow_zero)[0]


class AdaptiveLength:
    """Per-step draft length for one source: follows measured acceptance and cost within [n_min, n_max], or 0 (a
    plain step) when no length pays; `allow_zero=False` always drafts (the pool: its "none" arm is the plain step)."""

    def __init__(self, n_min: int, n_max: int, cost: CostModel | None = None, allow_zero: bool = True) -> None:
        if not 0 <= n_min <= n_max:
            raise ValueError("need 0 <= n_min <= n_max")
        self.n_min, self.n_max = n_min, n_max
        self.allow_zero = allow_zero
        self.acceptance = AcceptanceModel()
        self.cost = cost or CostModel()
        self._since_probe = 0

    def next_length(self) -> int:
        k = best_length(self.acceptance, self.cost, self.n_min, self.n_max, self.allow_zero)
        # At k = 0 nothing is observed, so the estimates would freeze; probe a short draft now and then.
        self._since_probe = self._since_probe + 1 if k == 0 else 0
        if k == 0 and self.n_max > 0 and self._since_probe >= 16:
            self._since_probe = 0
            return max(self.n_min, 1)
        return k

    def observe(
        self,
        drafted: int,
        accepted: int,
        draft_ms: float,
        verify_ms: float,
        declined: int = 0,
        cost_sample: bool = True,
        draft_sample: bool = True,
    ) -> None:
        """Learn from one step; `declined`: tokens the cost stop chose not to draft; `cost_sample` False: the step's
        milliseconds include one-off work (a first decode of its batch size, a request's first verify);
        `draft_sample` False: only its draft ms do (a catch-up), its verify ms are a sample."""
        self.acceptance.observe_declined(drafted, accepted, declined)
        if cost_sample:
            self.cost.observe(drafted, draft_ms, verify_ms, draft_sample)
