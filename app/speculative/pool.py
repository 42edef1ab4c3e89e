"""The source pool: per step, the draft source (or none) and its length with the most expected tokens per ms."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.speculative.adaptive import EMA_ALPHA, WARMUP_PULLS, AdaptiveLength, CostModel, best_rate

# The source pool chooses, per step, the source (draft model, prompt lookup, MTP, or none) and length with the most
# expected tokens per ms under each source's own acceptance model and the measured costs: a model-based choice, not a
# bandit over past rewards, because the per-step evidence is richer than a reward. A source with a cheap peek (prompt
# lookup) offers its proposal before the choice, which caps its length, and is scored in the shadow after every step
# it did not run (its proposal is compared with the tokens the target committed), so its estimate follows the text
# even while another source runs: it takes over as soon as the reply starts copying, and hands back when copying
# stops. A source that cannot be shadow-scored (the draft model would have to decode to be scored) is probed now and
# then when it is not chosen, so a bad start is not believed forever. A draft model that has not seen the prompt (or
# the reply so far) must prefill it before its first draft: the pool counts that catch-up against its share of the
# tokens still wanted, so a short reply, or one prompt lookup is carrying, does not pay half a second to try a source
# that gains a few ms per token.

# Plain decoding's warm-up once a 1-row decode's ms are measured (the session shares them across requests): none,
# as it has no acceptance to learn. Warmed up like a source, it forced plain steps into every request whose
# remembered plain pulls had decayed below WARMUP_PULLS, which is every request where drafting keeps winning: the
# pool over all class traces ran 96.86 -> 98.40 tok/s at 512 and 81.20 -> 82.05 at 8k without them (SIMULATED,
# H200 curves, bench/results/2026-12-06-plain-warm-up.md).
PLAIN_WARMUP_PULLS = 0

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
