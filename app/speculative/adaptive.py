"""Adaptive draft length and per-step draft-source selection, driven by measured acceptance and measured cost.

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

The source pool chooses, per step, the source (draft model, prompt lookup, MTP, or none) and length with the most
expected tokens per ms under each source's own acceptance model and the measured costs: a model-based choice, not a
bandit over past rewards, because the per-step evidence is richer than a reward. A source with a cheap peek (prompt
lookup) offers its proposal before the choice, which caps its length, and is scored in the shadow after every step
it did not run (its proposal is compared with the tokens the target committed), so its estimate follows the text
even while another source runs: it takes over as soon as the reply starts copying, and hands back when copying
stops. A source that cannot be shadow-scored (the draft model would have to decode to be scored) is probed now and
then when it is not chosen, so a bad start is not believed forever. A draft model that has not seen the prompt (or
the reply so far) must prefill it before its first draft: the pool counts that catch-up against its share of the
tokens still wanted, so a short reply, or one prompt lookup is carrying, does not pay half a second to try a source
that gains a few ms per token.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

EMA_ALPHA = 0.15  # ~7-step memory: fast enough to follow a change of content, slow enough to ignore one miss
PRIOR_ACCEPT = 0.6  # optimistic start so depth gets tried before evidence exists
MAX_POSITIONS = 64
WARMUP_PULLS = 3
# Plain decoding's warm-up once a 1-row decode's ms are measured (the session shares them across requests): none,
# as it has no acceptance to learn. Warmed up like a source, it forced plain steps into every request whose
# remembered plain pulls had decayed below WARMUP_PULLS, which is every request where drafting keeps winning: the
# pool over all class traces ran 96.86 -> 98.40 tok/s at 512 and 81.20 -> 82.05 at 8k without them (SIMULATED,
# H200 curves, bench/results/2026-12-06-plain-warm-up.md).
PLAIN_WARMUP_PULLS = 0


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


PROBE_EVERY = 16  # a source that is neither chosen nor shadow-scored is tried once after this many steps
PROBE_BUDGET = 0.05  # a probe that needs a catch-up may cost at most this share of the request's rest at plain speed
UNTESTED_BUDGET = PROBE_BUDGET  # the same bound on what an untested source's first draft may lose (_untested_cap)


@dataclass
class _Arm:
    length: AdaptiveLength
    pulls: int = 0
    reward: float = 0.0  # EMA of tokens emitted per ms on steps this arm was chosen (reported and remembered)
    shadowed: int = 0  # steps it was scored in the shadow (its proposal against the committed tokens)
    idle_steps: int = 0  # steps since it was last chosen or scored
    drafted_yet: bool = False  # it has drafted in this request (its first draft pays the prompt catch-up)


class SourcePool:
    """Chooses a draft source per step (and its length) to maximise expected tokens per ms (see the module text).

    "none" is always an arm: when no drafting source pays, plain decoding wins.
    """

    def __init__(
        self,
        sources: list[str],
        n_min: int,
        n_max: int,
        verify_ms: dict[int, float] | None = None,
        step_cost: Callable[[str, int], float] | None = None,
        draft_ms: dict[str, float] | None = None,
    ) -> None:
        """step_cost(source, k), when given, replaces measured milliseconds by a device cost profile: the pool
        then optimises for that device while acceptance stays real (used to study GPU behaviour on a CPU).
        draft_ms: each source's draft ms per token as the session measured it on earlier requests."""
        self.step_cost = step_cost
        if step_cost is not None:
            verify_ms = {}  # profile units are not milliseconds: never mix them into the shared measurements
        shared_verify = CostModel()  # verify cost depends on batch size, not on who drafted
        self.arms: dict[str, _Arm] = {}
        for name in [*sources, "none"]:
            if name in self.arms:
                continue
            cm = CostModel(verify_ms=shared_verify.verify_ms if verify_ms is None else verify_ms)
            # A drafting arm always drafts when chosen: whether to draft at all is the pool's choice (the "none"
            # arm). Letting its length controller answer 0 stalled it: a source picked for its past reward then ran
            # plain steps under its own name, its acceptance estimate froze (only a probe every 16 steps) and its
            # reward drifted to plain's, which the source memory handed on to later requests.
            length = AdaptiveLength(0, 0, cm) if name == "none" else AdaptiveLength(n_min, n_max, cm, allow_zero=False)
            if step_cost is None and draft_ms and name in draft_ms:
                cm.draft_ms_per_token = draft_ms[name]
            self.arms[name] = _Arm(length)
        self.total = 0  # steps chosen, remembered pulls included (the source memory's warm start adds them)
        self._catch_up: dict[str, float] = {}  # this step's (see choose)
        # Sources its catch-up kept out (name -> that catch-up's ms) since they last ran: the response says so.
        self.priced_out: dict[str, float] = {}
        # Why each other source was passed over when it was last weighed ("no_gain": it would not beat plain decoding
        # even if every drafted token were accepted; "slower": by its estimate another choice was faster), so a
        # source the request never tried says why instead of being silently absent (app.engine.session).
        self.passed_over: dict[str, str] = {}
        self._remaining: int | None = None
        self._emitted: dict[str, int] = {}  # tokens each arm's steps committed in this request (see _amortised)

    def choose(
        self,
        available: set[str] | None = None,
        offers: dict[str, int] | None = None,
        catch_up_ms: dict[str, float] | None = None,
        remaining: int | None = None,
    ) -> tuple[str, int]:
        """(source, draft length) for the next step, among the `available` sources (default all).

        offers: the proposal length of each source that peeked (prompt lookup); it caps that source's length.
        Availability is the context the choice conditions on: prompt lookup only competes on steps where it found
        a match, so a preamble with no match cannot teach the pool that lookup is useless before the copying starts.
        catch_up_ms: the one-off ms a source pays before its next draft (a draft model prefilling the prompt and
        reply it has not seen); remaining: the tokens still wanted at most. Together they amortise that cost (see
        _amortised): on a short reply a draft model that gains a little per token cannot win back its catch-up.
        """
        self.total += 1
        offers = offers or {}
        self._catch_up = catch_up_ms or {}
        self._remaining = remaining
        arms = {n: a for n, a in self.arms.items() if available is None or n in available or n == "none"}
        for arm in self.arms.values():
            arm.idle_steps += 1
        # Warm-up and probes are only for a source that could pay here: one that loses to plain decoding even if every
        # token it drafts were accepted (a small CPU, where verifying 2 rows costs ~2 decodes) is never worth a try.
        # A source that has measured acceptance (remembered: the source memory hands back part of its warm-up after
        # requests it sat out) and must catch up first is re-measured only within a probe's budget: its warm-up then
        # buys a re-measurement, not a first one, at the price of a prefill. Unbounded, the draft model's return to
        # its warm-up on a first turn prefilled 8k tokens for a few drafts (SIMULATED on the H200 curves: served in
        # order, copy_edit/near_copy fell from 98.8 to 77.8 tok/s, bench/results/2026-12-03-warm-up-catch-up.md).
        no_gain = {n for n in arms if n != "none" and not self._could_pay(n, offers, amortise=False)}
        for name in no_gain:
            self._pass_over(name, "no_gain")
        for name, arm in arms.items():
            if name in no_gain:
                continue
            warm_up = PLAIN_WARMUP_PULLS if name == "none" and self._decode_measured() else WARMUP_PULLS
            if arm.pulls < warm_up and not arm.shadowed:
                known = arm.length.acceptance.seen[0]
                if self._could_pay(name, offers) and (not known or self._probe_affordable(name)):
                    return self._chosen(name, self._length(name, offers) if name != "none" else 0)
                self._price_out(name)
        for name, arm in arms.items():  # never chosen nor scored for a while: its estimate may be stale
            if name != "none" and name not in offers and arm.idle_steps > PROBE_EVERY and self._could_pay(name, {}):
                if self._probe_affordable(name):
                    return self._chosen(name, max(self.arms[name].length.n_min, 1))
                self._price_out(name)
        best, best_k = "none", 0
        best_score = plain = self._plain_rate()
        for name, arm in arms.items():
            if name == "none":
                continue
            lo, hi = self._lengths(name, offers)
            hi = min(hi, self._untested_cap(name))
            if hi < lo:
                continue
            k, raw = best_rate(arm.length.acceptance, arm.length.cost, lo, hi, allow_zero=False)
            score = self._amortised(name, raw)
            if raw > plain >= score:
                self._price_out(name)
            elif name not in no_gain and name not in self.priced_out:  # its catch-up is the better reason
                self._pass_over(name, "slower")
            if score > best_score:
                best, best_k, best_score = name, k, score
        return self._chosen(best, best_k)

    def _chosen(self, name: str, k: int) -> tuple[str, int]:
        self.priced_out.pop(name, None)
        self.passed_over.pop(name, None)
        return name, k

    def _price_out(self, name: str) -> None:
        self.priced_out[name] = self._catch_up.get(name, 0.0)
        self.passed_over.pop(name, None)  # the last weighing says why, one reason per source

    def _pass_over(self, name: str, why: str) -> None:
        self.passed_over[name] = why
        self.priced_out.pop(name, None)

    def _amortised(self, name: str, rate: float) -> float:
        """`name`'s tokens per ms over the rest of the request once its catch-up is paid: R tokens at `rate` plus the
        one-off ms. R is the tokens still wanted (an upper bound: a reply may end sooner) times the share `name` can
        expect to carry (_share), so this never refuses a source that its share of the budget would pay back."""
        c = self._catch_up.get(name, 0.0)
        if c <= 0.0 or self._remaining is None or rate <= 0.0 or not self._decode_measured():
            return rate
        r = max(self._remaining * self._share(name), 1.0)
        return r / (r / rate + c)

    def _share(self, name: str) -> float:
        """The share of the rest of the reply `name` can expect to carry: the tokens of this request not already
        taken by another drafting source that needed no catch-up (+1 on both sides, so a request's first step
        expects it all). Why: a catch-up is paid once, and a draft model that only fills the gaps between prompt
        lookup's copies carries a few tokens of the reply, not all of it; counted against the whole budget, it
        prefilled a 2k prompt for a handful of drafts on copy edits (SIMULATED on the H200 curves:
        bench/results/2026-12-03-catch-up-share.md)."""
        seen = sum(self._emitted.values())
        taken = sum(
            n for other, n in self._emitted.items() if other not in (name, "none") and self._catch_up.get(other, 0) <= 0
        )
        return (seen - taken + 1) / (seen + 1)

    def _probe_affordable(self, name: str) -> bool:
        """A probe tests a stale estimate at the price of one step, which is cheap, unless the source must catch up
        first: then it may cost at most PROBE_BUDGET of the rest of the request at plain speed (bounded regret)."""
        c = self._catch_up.get(name, 0.0)
        if c <= 0.0 or self._remaining is None or not self._decode_measured():
            return True
        return c <= PROBE_BUDGET * self._remaining / self._plain_rate()

    def _decode_measured(self) -> bool:
        """Whether plain decoding's ms are measured: before that its cost is a prior in no unit, and a catch-up in
        ms cannot be weighed against it."""
        return 1 in self.arms["none"].length.cost.verify_ms

    def _lengths(self, name: str, offers: dict[str, int]) -> tuple[int, int]:
        """The draft lengths `name` may run this step, [lo, hi] (a peeked proposal caps it; empty when hi < lo)."""
        length = self.arms[name].length
        return max(length.n_min, 1), min(length.n_max, offers.get(name, length.n_max))

    def _plain_rate(self) -> float:
        """Plain decoding's tokens per ms: one token per 1-row decode."""
        return 1.0 / self.arms["none"].length.cost.step(0)

    def _could_pay(self, name: str, offers: dict[str, int], amortise: bool = True) -> bool:
        """Whether `name` beats plain decoding at some allowed length if all its tokens were accepted (its catch-up
        amortised over the rest of the request, unless not `amortise`)."""
        if name == "none":
            return True
        cost, (lo, hi), plain = self.arms[name].length.cost, self._lengths(name, offers), self._plain_rate()
        rates = ((k + 1) / cost.step(k) for k in range(lo, hi + 1))
        return any((self._amortised(name, r) if amortise else r) > plain for r in rates)

    def draft_costs(self) -> dict[str, float]:
        """Each drafting source's measured draft ms per token (for the session's next requests)."""
        out = {}
        for name, arm in self.arms.items():
            d = arm.length.cost.draft_ms_per_token
            if name != "none" and d is not None and self.step_cost is None:
                out[name] = d
        return out

    def _length(self, name: str, offers: dict[str, int]) -> int:
        length = min(self.arms[name].length.next_length(), self._untested_cap(name))
        return min(length, offers[name]) if name in offers else length

    def _untested_cap(self, name: str) -> int:
        """The deepest draft `name` may run before this request has tested it (neither drafted nor scored in the
        shadow): one whose total miss (the step costs its draft and verify, and still emits the target's one token)
        wastes at most UNTESTED_BUDGET of the rest of the request at plain speed. Why: until then its acceptance is
        the source memory's, learnt on other prompts of its class, and expected tokens per ms can call for a long
        draft on that evidence alone. On this CPU, where a verify row costs about a decode, a remembered 0.66-0.99
        per position made prompt lookup's first draft on a copy edit 16 tokens; none was accepted, and that one
        verify cost 7-8 plain steps, 12-14 % of a 64-token reply (bench/results/archive/2026-12-04-classes-v8-cpu.md).
        On a GPU, where 16 rows cost little more than 1, the cap does not bind; after one test the estimate decides."""
        arm = self.arms[name]
        lo, hi = self._lengths(name, {})
        if arm.drafted_yet or arm.shadowed or self._remaining is None or not self._decode_measured():
            return hi
        cost, plain = arm.length.cost, 1.0 / self._plain_rate()
        budget = UNTESTED_BUDGET * self._remaining * plain
        k = lo
        while k < hi and cost.step(k + 1) - plain <= budget:
            k += 1
        return k

    def observe(
        self,
        source: str,
        drafted: int,
        accepted: int,
        emitted: int,
        draft_ms: float,
        verify_ms: float,
        declined: int = 0,
        cost_sample: bool = True,
        peeked: tuple[int, int] | None = None,
    ) -> None:
        """Learn from one step (see AdaptiveLength.observe for `declined` and `cost_sample`); the arm's reward
        takes every step, one-off costs included: they were paid. `peeked`: (proposed, matched) of the source's
        whole peeked proposal against the committed tokens, when it peeked (prompt lookup), of which it drafted
        the first `drafted`."""
        arm = self.arms[source]
        if self.step_cost is not None:
            # The step's own verify is its verify_ms: the draft's share is what the source adds to that batch.
            draft_ms = self.step_cost(source, drafted) - self.step_cost("none", drafted) if drafted else 0.0
            verify_ms = self.step_cost("none", drafted)
            cost_sample = True  # a profile has no one-off work
        elif drafted and not arm.drafted_yet:
            cost_sample = False  # a source's first draft in a request also decodes the whole prompt (its catch-up)
        if drafted:
            arm.drafted_yet = True
        # A step that first caught its KV up (choose() priced that catch-up) is no sample of the draft's ms per token:
        # the catch-up is paid once, and choose() prices it apart. Counted per drafted token, a 1-token probe after
        # 16 plain steps measured 66 ms on this CPU where a steady draft token costs 15, so the draft model looked
        # 4x dearer than it is and could stop paying at all (bench/results/2026-12-04-draft-lag.md).
        caught_up = self.step_cost is None and self._catch_up.get(source, 0.0) > 0.0
        arm.length.observe(drafted, accepted, draft_ms, verify_ms, declined, cost_sample, draft_sample=not caught_up)
        if peeked is not None and drafted and accepted == drafted and peeked[0] > drafted:
            # The target's own token after a wholly accepted draft tests the proposal's next position for free.
            # Without it a peeked source's deeper positions were tested only while another source ran, so a length
            # that settled short stayed short: prompt lookup drafted 3 of a 16-token copy at every step on copy
            # edits, where lookup alone drafted 8 (SIMULATED, bench/results/2026-12-03-catch-up-share.md).
            arm.length.acceptance.observe_at(drafted, peeked[1] > drafted)
        rate = emitted / max(draft_ms + verify_ms, 1e-6)
        arm.reward = rate if arm.pulls == 0 else arm.reward + EMA_ALPHA * (rate - arm.reward)
        arm.pulls += 1
        # A step its cost stop declined (no token confident enough to draft) tested nothing, so the probe clock does
        # not start again: a draft model that misses a few times in a row is then asked on every step until it
        # drafts, rather than once per PROBE_EVERY while its estimate stays where the misses left it. SIMULATED on
        # the H200 curves at 8k, held-out chat: 64.66 -> 66.05 tok/s (bench/results/2026-12-04-first-draft.md).
        if drafted or source == "none":
            arm.idle_steps = 0
        self._emitted[source] = self._emitted.get(source, 0) + emitted

    def observe_shadow(self, source: str, proposed: int, matched: int, committed: int) -> None:
        """Score a source that peeked but did not run: of its `proposed` tokens, the first `matched` equal the
        `committed` tokens of the step. Only the committed positions are known, so a proposal that matched all of
        them tested that many positions (all accepted) and says nothing about the rest."""
        arm = self.arms.get(source)
        if arm is None or proposed <= 0:
            return
        tested = min(proposed, committed)
        arm.length.acceptance.observe(tested, min(matched, tested))
        arm.shadowed += 1
        arm.idle_steps = 0

    def shares(self) -> dict[str, int]:
        return {name: arm.pulls for name, arm in self.arms.items()}


def profile_cost_model(step_cost: Callable[[str, int], float], source: str, max_rows: int) -> CostModel:
    """A CostModel holding a device cost profile (see profile_cost) for one source, every batch size up to
    `max_rows` known: the cost stop then works in that device's units (its floors do not depend on milliseconds)."""
    verify = {b: step_cost("none", b - 1) for b in range(1, max_rows + 1)}
    return CostModel(verify_ms=verify, draft_ms_per_token=step_cost(source, 1) - step_cost("none", 1))


def profile_cost(verify_ratio: list[float], draft_ratio: dict[str, float]) -> Callable[[str, int], float]:
    """A device cost profile in units of one target token: verify_ratio[b-1] is a verify batch of b tokens,
    draft_ratio[source] the cost of one drafted token. Returns step_cost(source, k) for SourcePool."""

    def cost(source: str, k: int) -> float:
        b = min(k + 1, len(verify_ratio))
        extra = max(0, k + 1 - len(verify_ratio))
        verify = verify_ratio[b - 1] + extra * (verify_ratio[-1] - verify_ratio[-2])
        return verify + (draft_ratio.get(source, 0.0) * k if source != "none" else 0.0)

    return cost
