"""Adaptive draft length and the source pool on synthetic telemetry (pure, fast)."""

from __future__ import annotations

import random

from app.speculative.adaptive import AdaptiveLength, CostModel
from app.speculative.pool import SourcePool, profile_cost

# ms by verify batch size: a cheap verify, shaped like the 1.5B on an H200 (../shared/MODELS.md: 8 tokens ~1.84x one)
GPU_VERIFY = dict(enumerate([2.8, 2.9, 3.2, 3.5, 3.9, 4.3, 4.7, 5.2, 5.6], start=1))
CPU_VERIFY = {b: 64.0 * b for b in range(1, 18)}  # a verify of b tokens costs b single decodes (2-core CPU)


def _drive(
    ctl: AdaptiveLength, steps: int, accept_all: bool, verify: dict[int, float], draft_ms_tok: float
) -> list[int]:
    lengths = []
    for _ in range(steps):
        k = ctl.next_length()
        assert ctl.n_min <= k <= ctl.n_max or k == 0
        lengths.append(k)
        acc = k if accept_all else 0
        ctl.observe(k, acc, draft_ms_tok * k, verify.get(k + 1, verify[max(verify)]))
    return lengths


def test_sustained_full_acceptance_grows_to_the_cap_when_verify_is_cheap() -> None:
    ctl = AdaptiveLength(0, 8)
    lengths = _drive(ctl, 60, True, GPU_VERIFY, draft_ms_tok=0.05)
    assert lengths[-10:] == [8] * 10


def test_sustained_rejection_shrinks_to_off() -> None:
    ctl = AdaptiveLength(0, 8)
    lengths = _drive(ctl, 60, False, GPU_VERIFY, draft_ms_tok=0.05)
    assert lengths[-15:].count(0) >= 14  # off, apart from a rare probe


def test_rejection_with_a_floor_stays_at_n_min_or_off() -> None:
    ctl = AdaptiveLength(2, 8)
    lengths = _drive(ctl, 60, False, GPU_VERIFY, draft_ms_tok=0.05)
    assert all(k == 0 or 2 <= k <= 8 for k in lengths)
    assert set(lengths[-10:]) <= {0, 2}


def test_on_a_cpu_cost_curve_even_full_acceptance_does_not_pay_much_depth() -> None:
    # Each verified token costs a full decode and the draft costs half of one: drafting cannot win.
    ctl = AdaptiveLength(0, 8)
    lengths = _drive(ctl, 60, True, CPU_VERIFY, draft_ms_tok=35.0)
    assert lengths[-10:].count(0) >= 9


def test_cost_model_interpolates_and_extrapolates() -> None:
    cm = CostModel()
    assert cm.verify(3) > cm.verify(0)  # the prior charges some cost for depth
    cm.observe(0, 0.0, 10.0)
    cm.observe(4, 4.0, 20.0)
    assert abs(cm.verify(2) - 15.0) < 1e-9
    assert cm.verify(8) > 20.0


def _pool_run(rates: dict[str, tuple[float, float]], steps: int, seed: int) -> dict[str, int]:
    """rates[source] = (acceptance per position, draft ms per token); verify cost GPU-like."""
    rng = random.Random(seed)
    pool = SourcePool([s for s in rates if s != "none"], 0, 8)
    for _ in range(steps):
        name, k = pool.choose()
        if name == "none":
            pool.observe("none", 0, 0, 1, 0.0, 2.8)
            continue
        acc_p, dms = rates[name]
        acc = 0
        while acc < k and rng.random() < acc_p:
            acc += 1
        pool.observe(name, k, acc, acc + 1, dms * k, GPU_VERIFY.get(k + 1, 5.2))
    return pool.shares()


def test_pool_converges_to_the_better_source_and_still_explores() -> None:
    shares = _pool_run({"draft": (0.5, 1.5), "lookup": (0.95, 0.01)}, 400, seed=1)
    assert shares["lookup"] > 0.7 * 400
    assert shares["draft"] >= 3  # exploration kept trying the other source
    # Plain decoding has nothing to explore once one plain step has measured its cost: it is 1 token per decode.
    assert shares["none"] >= 1


def test_plain_decoding_is_warmed_up_only_until_a_decode_is_measured() -> None:
    """Plain decoding's only unknown is its cost: with a 1-row decode measured (the session's shared verify costs),
    a request whose remembered plain pulls decayed below the warm-up does not spend its first steps on plain
    decoding; without that measurement plain decoding is tried first, as before."""
    measured = SourcePool(["lookup"], 0, 8, verify_ms=dict(GPU_VERIFY))
    measured.arms["lookup"].pulls = 3  # a remembered source, past its own warm-up
    assert measured.choose()[0] == "lookup"
    cold = SourcePool(["lookup"], 0, 8)
    cold.arms["lookup"].pulls = 3
    assert cold.choose()[0] == "none"


def test_a_device_profile_charges_a_draft_only_what_it_adds_to_the_verify() -> None:
    """Under a cost profile the step costs step_cost(source, k): the verify of k+1 rows plus k drafted tokens. The
    draft's share is the k tokens alone (it once also held the verify's growth over 1 row, counted twice)."""
    profile = profile_cost([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8], {"draft": 0.1})
    pool = SourcePool(["draft"], 0, 8, step_cost=profile)
    pool.observe("draft", 4, 4, 5, 999.0, 999.0)  # measured ms are ignored under a profile
    assert abs(pool.arms["draft"].length.cost.draft_ms_per_token - 0.1) < 1e-9
    assert abs(pool.arms["draft"].reward - 5 / 1.8) < 1e-9  # 5 tokens for one step of profile cost 1.4 + 0.4


def test_pool_picks_plain_decoding_when_no_source_pays() -> None:
    shares = _pool_run({"draft": (0.05, 3.0), "lookup": (0.02, 0.5)}, 400, seed=2)
    assert shares["none"] > 0.5 * 400


def test_a_drafting_arm_the_pool_picks_always_drafts_so_its_estimates_keep_learning() -> None:
    """The stall: after early rejections a drafting arm's length controller answered 0, so the pool spent steps
    under the draft's name that drafted nothing, its acceptance estimate froze, and it never recovered. Here the
    draft starts badly (every token rejected for 12 of its steps) and then accepts 90 %: the pool must notice."""
    rng = random.Random(4)
    pool = SourcePool(["draft"], 0, 8)
    draft_steps = drafted_zero = 0
    for _ in range(600):
        name, k = pool.choose()
        if name == "none":
            pool.observe("none", 0, 0, 1, 0.0, 2.8)
            continue
        draft_steps += 1
        drafted_zero += k == 0
        p = 0.0 if draft_steps <= 12 else 0.9
        acc = 0
        while acc < k and rng.random() < p:
            acc += 1
        pool.observe(name, k, acc, acc + 1, 0.3 * k, GPU_VERIFY.get(k + 1, 5.2))
    assert drafted_zero == 0
    assert pool.shares()["draft"] > 0.6 * 600  # it recovered and won once the draft turned good
    assert pool.arms["draft"].length.acceptance.rate(0) > 0.7


def test_adaptive_length_alone_still_answers_0_when_no_length_pays() -> None:
    length = AdaptiveLength(0, 8, CostModel(verify_ms={1: 2.8, 2: 5.6, 5: 14.0, 9: 25.0}))
    for _ in range(20):
        length.observe(4, 0, 1.0, 14.0)
    assert length.next_length() == 0


def _copying_run(shadow: bool, seed: int = 5) -> list[str]:
    """A reply that copies from its prompt after 40 steps of fresh text: prompt lookup proposes 8 tokens on every
    step, none right before the copying and all right after it; the draft model accepts half its tokens all along.
    Returns the source chosen on each of 120 steps."""
    rng = random.Random(seed)
    pool = SourcePool(["draft", "lookup"], 0, 8)
    chosen = []
    for step in range(120):
        copying = step >= 40
        name, k = pool.choose({"draft", "lookup"}, {"lookup": 8})
        chosen.append(name)
        if name == "lookup":
            acc = k if copying else 0
            pool.observe(name, k, acc, acc + 1, 0.01, GPU_VERIFY[k + 1])
        elif name == "draft":
            acc = 0
            while acc < k and rng.random() < 0.5:
                acc += 1
            pool.observe(name, k, acc, acc + 1, 0.3 * k, GPU_VERIFY.get(k + 1, 5.6))
        else:
            acc = 0
            pool.observe("none", 0, 0, 1, 0.0, GPU_VERIFY[1])
        if shadow and name != "lookup":  # the session scores the peeked proposal against the committed tokens
            pool.observe_shadow("lookup", 8, 8 if copying else 0, acc + 1)
    return chosen


def test_a_peeked_source_scored_in_the_shadow_takes_over_as_soon_as_copying_starts() -> None:
    chosen = _copying_run(shadow=True)
    assert chosen[20:40].count("lookup") == 0  # no copying yet: its shadow score keeps it out
    first = next(i for i in range(40, 120) if chosen[i] == "lookup")
    assert first <= 43, chosen[38:50]  # it is chosen within a few steps of the copying's start
    assert chosen[50:].count("lookup") >= 0.9 * 70
    # Without the shadow scores, lookup's estimate stays where its warm-up left it (rejected) until luck moves it.
    assert _copying_run(shadow=False)[40:60].count("lookup") < chosen[40:60].count("lookup")


def test_a_source_neither_chosen_nor_scored_is_probed_now_and_then() -> None:
    pool = SourcePool(["draft"], 0, 8)
    picks = []
    for _ in range(200):
        name, k = pool.choose()
        picks.append(name)
        if name == "draft":
            pool.observe("draft", k, 0, 1, 0.3 * k, GPU_VERIFY.get(k + 1, 5.6))  # never accepted
        else:
            pool.observe("none", 0, 0, 1, 0.0, GPU_VERIFY[1])
    late = picks[50:]
    assert late.count("none") > 0.85 * len(late)  # plain wins once the draft is known to fail
    assert 3 <= late.count("draft") <= len(late) // 10  # yet the draft is still tried, rarely


def test_a_probe_its_cost_stop_declined_tested_nothing_and_is_tried_again() -> None:
    """The draft is known to fail, so plain decoding runs and the draft is probed after PROBE_EVERY steps. When the
    probe's cost stop drafts nothing (its first token was not confident enough), nothing was tested: the draft is
    asked again on the next step, and only a probe that drafted starts the clock again."""
    from app.speculative.adaptive import WARMUP_PULLS
    from app.speculative.pool import PROBE_EVERY

    pool = SourcePool(["draft"], 0, 8)
    acc = pool.arms["draft"].length.acceptance
    acc.rates[0], acc.seen[0] = 0.01, True
    pool.arms["draft"].pulls = pool.arms["none"].pulls = WARMUP_PULLS  # known from earlier requests
    pool.observe("none", 0, 0, 1, 0.0, GPU_VERIFY[1])
    for _ in range(PROBE_EVERY):
        assert pool.choose()[0] == "none"
        pool.observe("none", 0, 0, 1, 0.0, GPU_VERIFY[1])
    assert pool.choose()[0] == "draft"  # the probe
    pool.observe("draft", 0, 0, 1, 0.3, GPU_VERIFY[1], declined=1)  # the cost stop drafted nothing
    assert pool.choose()[0] == "draft"  # asked again
    pool.observe("draft", 1, 0, 1, 0.3, GPU_VERIFY[2])  # drafted and missed: tested
    assert pool.choose()[0] == "none"


def test_a_source_that_cannot_pay_even_when_always_right_is_not_tried() -> None:
    """On a small CPU (verify of b rows ~ b decodes) with the draft's cost known from earlier requests, drafting
    loses to plain decoding even at 100 % acceptance: no warm-up pulls, no probes. Where it could pay, it is tried."""
    cpu = SourcePool(["draft"], 0, 8, verify_ms=dict(CPU_VERIFY), draft_ms={"draft": 20.0})
    gpu = SourcePool(["draft"], 0, 8, verify_ms=dict(GPU_VERIFY), draft_ms={"draft": 0.3})
    for pool, verify in ((cpu, CPU_VERIFY), (gpu, GPU_VERIFY)):
        for _ in range(60):
            name, k = pool.choose()
            if name == "none":
                pool.observe("none", 0, 0, 1, 0.0, verify[1])
            else:
                pool.observe(name, k, 0, 1, 0.3 * k, verify[k + 1])
    assert cpu.shares()["draft"] == 0
    assert cpu.passed_over == {"draft": "no_gain"}  # and it says why (per_source's idle_reason)
    assert gpu.shares()["draft"] >= 3  # its warm-up, then probes


def test_a_sources_first_draft_in_a_request_is_not_a_cost_sample() -> None:
    """Its milliseconds include decoding the whole prompt into the draft model (its catch-up), not drafting."""
    pool = SourcePool(["draft"], 0, 8, verify_ms={})
    pool.observe("draft", 1, 1, 2, 250.0, 60.0)  # catch-up of a 150-token prompt + 1 token
    assert pool.arms["draft"].length.cost.draft_ms_per_token is None
    pool.observe("draft", 2, 2, 3, 40.0, 65.0)
    assert pool.arms["draft"].length.cost.draft_ms_per_token == 20.0
    assert pool.draft_costs() == {"draft": 20.0}


def test_a_step_that_caught_up_is_no_sample_of_the_drafts_ms_per_token() -> None:
    """A probe after plain steps first decodes what it missed (choose() priced it): its draft ms are not per token.
    The figures: a 1-token draft on this CPU after a lag of 16 tokens, 72 ms, its catch-up priced 57 ms, beside a
    steady 8-token draft at 16 ms per token (bench/results/2026-12-04-draft-lag.md)."""
    pool = SourcePool(["draft"], 0, 8, verify_ms=dict(MILD_CPU_VERIFY), draft_ms={"draft": 16.0})
    pool.arms["draft"].drafted_yet = True  # past its first draft, which is never a sample
    pool.choose(None, None, {"draft": 57.0}, 100)
    pool.observe("draft", 1, 1, 2, 72.0, 70.0)
    cost = pool.arms["draft"].length.cost
    assert cost.draft_ms_per_token == 16.0
    assert cost.verify_ms[2] < MILD_CPU_VERIFY[2]  # its verify (70 ms, 72 known) is still a sample
    pool.choose(None, None, {"draft": 0.0}, 99)  # drafting on from where it left off: a sample
    pool.observe("draft", 8, 8, 9, 8 * 18.0, 300.0)
    assert cost.draft_ms_per_token is not None and 16.0 < cost.draft_ms_per_token <= 18.0
    assert pool.arms["draft"].reward > 0 and pool.arms["draft"].pulls == 2  # rewards take every step, catch-up too


# The 1.5B target on this CPU (../shared/MODELS.md: a verify of 2 rows costs 1.8 decodes): a cheap draft could pay
# a few ms per token when always right.
MILD_CPU_VERIFY = {b: 40.0 * (1 + 0.8 * (b - 1)) for b in range(1, 18)}


def _catch_up_run(catch_up_ms: float, remaining: int, steps: int = 40) -> tuple[SourcePool, list[str]]:
    """A fresh pool (draft cost known, acceptance not) whose draft model must first prefill `catch_up_ms` of
    text it has not seen; the catch-up is gone once it drafted (its KV then follows the reply)."""
    pool = SourcePool(["draft"], 0, 8, verify_ms=dict(MILD_CPU_VERIFY), draft_ms={"draft": 4.0})
    picks, caught_up = [], False
    for i in range(steps):
        left = remaining - i
        name, k = pool.choose(None, None, {"draft": 0.0 if caught_up else catch_up_ms}, left)
        picks.append(name)
        if name == "none":
            pool.observe("none", 0, 0, 1, 0.0, MILD_CPU_VERIFY[1])
        else:
            caught_up = True
            pool.observe(name, k, k, k + 1, 4.0 * k, MILD_CPU_VERIFY[k + 1])
    return pool, picks


def test_a_catch_up_the_rest_of_the_reply_cannot_win_back_keeps_a_source_out() -> None:
    """A 64-token reply gains at most ~4 of 40 ms per token from this draft, far less than 800 ms of catch-up:
    no warm-up, no probe, and the pool says why. A 2,000-token reply can win it back: the draft is tried."""
    short, picks = _catch_up_run(800.0, remaining=64)
    assert "draft" not in picks
    assert short.priced_out == {"draft": 800.0}
    long, picks = _catch_up_run(800.0, remaining=2000)
    assert picks[0] == "draft" and long.priced_out == {}


def test_a_remembered_source_gets_its_warm_up_back_after_a_catch_up_only_within_a_probes_budget() -> None:
    """The source memory hands a source that sat out earlier requests part of its warm-up back. When the source
    must first catch up, that warm-up re-measures known acceptance at the price of a prefill: it is a probe, so it
    is bounded by PROBE_BUDGET (4,000 ms here: 5 % of 2,000 tokens at 40 ms). A source the pool knows nothing of
    still gets its warm-up whenever the rest of the reply could pay the catch-up back."""
    from app.speculative.memory import ArmMemory, warm_start_pool

    remembered = ArmMemory(reward=0.02, pulls=1.0, acceptance=[0.5, 0.5], draft_ms_per_token=4.0, requests=3)

    def first_pick(memory: ArmMemory | None, catch_up: float) -> tuple[str, SourcePool]:
        pool = SourcePool(["draft"], 0, 8, verify_ms=dict(MILD_CPU_VERIFY), draft_ms={"draft": 4.0})
        if memory is not None:
            warm_start_pool(pool, {"draft": memory})
            assert pool.arms["draft"].pulls == 1  # below WARMUP_PULLS: its warm-up is partly back
        return pool.choose(None, None, {"draft": catch_up}, 2000)[0], pool

    # All 8 drafted tokens accepted, the draft makes a step 10 % cheaper per token: 2,000 tokens pay back ~7,000 ms.
    assert first_pick(None, 5000.0)[0] == "draft"  # unknown: its first measurement is worth the prefill
    name, pool = first_pick(remembered, 5000.0)
    assert name == "none" and pool.priced_out == {"draft": 5000.0}  # known, and the prefill is over budget
    assert first_pick(remembered, 3000.0)[0] == "draft"  # within budget: re-measured as before
    assert first_pick(remembered, 0.0)[0] == "draft"  # nothing to catch up: its warm-up is a step's price


def test_without_a_catch_up_the_pool_chooses_as_before() -> None:
    """No catch-up (or none measured) leaves every choice to the per-step rates."""
    for catch_up in (0.0, None):
        pool = SourcePool(["draft"], 0, 8, verify_ms=dict(MILD_CPU_VERIFY), draft_ms={"draft": 4.0})
        plain = SourcePool(["draft"], 0, 8, verify_ms=dict(MILD_CPU_VERIFY), draft_ms={"draft": 4.0})
        for _ in range(30):
            a = pool.choose(None, None, None if catch_up is None else {"draft": catch_up}, 64)
            assert a == plain.choose()
            for p in (pool, plain):
                name, k = a
                p.observe(name, k, k // 2, k // 2 + 1, 4.0 * k, MILD_CPU_VERIFY[k + 1])


def test_a_catch_up_cannot_be_weighed_before_plain_decoding_is_measured() -> None:
    """The pool's plain cost is a unitless prior until a 1-row decode was timed: ms of catch-up are not compared."""
    pool = SourcePool(["draft"], 0, 8, verify_ms={})
    assert pool.choose(None, None, {"draft": 10_000.0}, 8)[0] == "draft"  # its warm-up, as without a catch-up


def test_a_probe_needing_a_catch_up_costs_at_most_its_budget() -> None:
    """Once the draft is known to fail, a probe after a catch-up is allowed only while that catch-up is within
    PROBE_BUDGET of the rest of the request at plain speed."""
    from app.speculative.pool import PROBE_BUDGET, PROBE_EVERY

    def probes(catch_up: float, remaining: int) -> int:
        pool = SourcePool(["draft"], 0, 8, verify_ms=dict(GPU_VERIFY), draft_ms={"draft": 0.3})
        for _ in range(40):  # the draft keeps failing: plain wins from then on, apart from probes
            name, k = pool.choose()
            if name == "draft":
                pool.observe("draft", k, 0, 1, 0.3 * k, GPU_VERIFY[k + 1])
            else:
                pool.observe("none", 0, 0, 1, 0.0, GPU_VERIFY[1])
        n = 0
        for _ in range(3 * PROBE_EVERY):
            name, k = pool.choose(None, None, {"draft": catch_up}, remaining)
            if name == "draft":
                n += 1
                pool.observe("draft", max(k, 1), 0, 1, 0.3, GPU_VERIFY[2])
            else:
                pool.observe("none", 0, 0, 1, 0.0, GPU_VERIFY[1])
        return n

    budget = PROBE_BUDGET * 1000 * GPU_VERIFY[1]  # ms of plain decoding the probe may cost over 1,000 tokens
    assert probes(0.9 * budget, 1000) >= 2
    assert probes(1.1 * budget, 1000) == 0


def _known_pool() -> SourcePool:
    """A draft model and prompt lookup both known from earlier requests (no warm-ups left), plain decoding timed."""
    from app.speculative.memory import ArmMemory, warm_start_pool

    pool = SourcePool(["draft", "lookup"], 0, 8, verify_ms=dict(GPU_VERIFY), draft_ms={"draft": 0.3})
    warm_start_pool(
        pool,
        {
            "draft": ArmMemory(reward=0.5, pulls=3.0, acceptance=[0.9] * 8, draft_ms_per_token=0.3, requests=3),
            "lookup": ArmMemory(reward=0.9, pulls=3.0, acceptance=[0.99] * 8, draft_ms_per_token=0.01, requests=3),
            "none": ArmMemory(reward=0.3, pulls=3.0, requests=3),
        },
    )
    pool.observe("none", 0, 0, 1, 0.0, GPU_VERIFY[1])
    return pool


def test_a_catch_up_is_weighed_against_the_share_of_the_reply_the_source_can_expect_to_carry() -> None:
    """The draft model must first prefill 100 ms of prompt. Over the 200 tokens still wanted it would pay that back,
    but once prompt lookup has carried the reply's tokens so far, the draft can expect only the gaps between copies:
    on a step lookup has nothing to offer, plain decoding runs and the pool says the catch-up kept the draft out."""
    fresh = _known_pool()
    assert fresh.choose({"draft"}, None, {"draft": 100.0}, 200)[0] == "draft"

    copied = _known_pool()
    for i in range(5):
        name, k = copied.choose({"draft", "lookup"}, {"lookup": 8}, {"draft": 100.0}, 200 - 9 * i)
        assert name == "lookup"
        copied.observe(name, k, k, k + 1, 0.01, GPU_VERIFY[k + 1], peeked=(8, 8))
    assert copied.choose({"draft"}, None, {"draft": 100.0}, 155)[0] == "none"
    assert copied.priced_out == {"draft": 100.0}
    assert copied.choose({"draft"}, None, {"draft": 0.0}, 155)[0] == "draft"  # caught up: no share to weigh


def test_a_wholly_accepted_peeked_draft_tests_the_proposals_next_position() -> None:
    """Prompt lookup offers 16 tokens of a copy on every step and all of them are right, but its position 3 starts
    out believed bad (a remembered miss). Its own drafts of 3 never test that position; the target's token after
    each wholly accepted draft does (the proposal's fourth token against it), so the length grows to the cap."""

    def lengths(peek: bool) -> list[int]:
        pool = SourcePool(["lookup"], 0, 8, verify_ms=dict(GPU_VERIFY))
        acc = pool.arms["lookup"].length.acceptance
        acc.rates[:4], acc.seen[:4] = [1.0, 1.0, 1.0, 0.05], [True] * 4
        out = []
        for _ in range(60):
            name, k = pool.choose({"lookup"}, {"lookup": 16})
            if name == "none":
                pool.observe("none", 0, 0, 1, 0.0, GPU_VERIFY[1], peeked=None)
                continue
            out.append(k)
            pool.observe(name, k, k, k + 1, 0.01, GPU_VERIFY[k + 1], peeked=(16, 16) if peek else None)
        return out

    assert set(lengths(peek=False)) == {3}
    assert lengths(peek=True)[-10:] == [8] * 10


def test_a_sources_first_draft_in_a_request_risks_at_most_a_probes_budget() -> None:
    """Prompt lookup is remembered to be right 99 % of the time per position and offers 16 tokens. Before this
    request has tested it, its draft is only as deep as a total miss can afford (PROBE_BUDGET of the rest at plain
    speed: 5 % of 60 tokens x 40 ms = 120 ms, 3 tokens at 32 ms a verify row), where the estimate alone asks for 6;
    once tested (drafted, or scored in the shadow), the estimate decides. Where verify rows are cheap (a GPU) or
    the request's length is not known, the first draft is as deep as before."""
    from app.speculative.memory import ArmMemory, warm_start_pool

    def pool(verify: dict[int, float]) -> SourcePool:
        p = SourcePool(["lookup"], 0, 16, verify_ms=dict(verify))
        memory = ArmMemory(reward=0.05, pulls=3.0, acceptance=[0.99] * 16, draft_ms_per_token=0.0, requests=3)
        warm_start_pool(p, {"lookup": memory, "none": ArmMemory(reward=0.02, pulls=3.0, requests=3)})
        return p

    cpu = pool(MILD_CPU_VERIFY)
    assert cpu.choose({"lookup"}, {"lookup": 16}, None, 60) == ("lookup", 3)
    assert pool(MILD_CPU_VERIFY).choose({"lookup"}, {"lookup": 16}, None, None) == ("lookup", 6)
    assert pool(GPU_VERIFY).choose({"lookup"}, {"lookup": 16}, None, 60) == ("lookup", 16)
    cpu.observe("lookup", 3, 3, 4, 0.0, MILD_CPU_VERIFY[4], peeked=(16, 16))
    assert cpu.choose({"lookup"}, {"lookup": 16}, None, 56) == ("lookup", 6)

    shadowed = pool(MILD_CPU_VERIFY)
    shadowed.observe_shadow("lookup", 16, 1, 1)  # its first proposed token matched the committed one
    assert shadowed.choose({"lookup"}, {"lookup": 16}, None, 59) == ("lookup", 6)
