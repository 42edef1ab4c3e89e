"""A draft model's catch-up (prefilling text it has not seen) weighed against the tokens still wanted, on a real
Session: the pool leaves a draft untried when a short reply cannot win it back and says why; Dynamic Draft runs its
best choice without the draft model instead of a fixed draft pick that cannot pay, and says so in the record; the
measured prefill speed survives a restart in the source memory."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.policy import DynamicDraftPolicy, new_table
from app.policy.store import calibration_store
from app.runtime.sampling import SamplingParams
from app.speculative.control import PASSED_OVER
from app.speculative.settings import SpecSettings
from tests.engine.helpers import DRAFT, LOOKUP, draft_wins_narrowly, long_text

POOL = SpecSettings("pool", 8)


def _run(s: Session, topic: str, max_tokens: int, spec: SpecSettings | None = POOL) -> GenerationSummary:
    req = GenerationRequest(
        messages=({"role": "user", "content": f"Summarise this:\n\n{long_text(topic)}"},),
        max_tokens=max_tokens,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
    )
    return [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary


@pytest.fixture()
def session(smollm2_path: Path, smollm2_q2k_path: Path) -> Iterator[Session]:
    # No source memory: each request's pool starts cold, so the draft model's warm-up is what is at stake.
    cfg = EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=2048, source_memory=False)
    s = Session(cfg)
    yield s
    s.close()


def _price_as_a_small_draft(s: Session) -> None:
    one = s._verify_ms[1]
    s._verify_ms.update({b: one * (1 + 0.02 * (b - 1)) for b in range(1, 10)})
    s._draft_ms["draft"] = 0.1 * one


def test_a_reply_too_short_to_win_back_the_catch_up_leaves_the_draft_model_untried(session: Session) -> None:
    first = _run(session, "river", 24)  # nothing measured yet: the draft model warms up and catches up
    assert first.per_source["draft"]["drafted"] > 0
    draft = session.sources["draft"]
    assert draft.prefill_ms_per_token is not None and draft.prefill_ms_per_token > 0  # type: ignore[attr-defined]

    # The 135M pair costs about the same per token, so whether this draft could pay at all is a near-tie on this CPU
    # (the pool's other rule), and on a loaded machine the measured verify rows tip it (CI: the draft was then passed
    # over as unable to pay, not for its catch-up). Price its drafting as a small draft's (a tenth of a target
    # decode) and the verify rows as a memory-bound device's (nearly flat) so that only the catch-up decides.
    _price_as_a_small_draft(session)
    short = _run(session, "forest", 3)  # ~250 new tokens to prefill for at most 2 drafted-for tokens
    assert short.per_source["draft"]["drafted"] == 0
    assert short.per_source["draft"]["idle_reason"].startswith("not tried: prefilling the text it had not seen")

    session.weigh_catch_up = False  # the same request as the pool chose before: the draft's warm-up runs
    _price_as_a_small_draft(session)
    before = _run(session, "meadow", 3)
    assert before.per_source["draft"]["drafted"] > 0
    assert "idle_reason" not in before.per_source["draft"]


def test_a_draft_that_cannot_pay_here_says_so_instead_of_being_absent(session: Session) -> None:
    """A source the pool never tries is listed with why: here a draft that costs ten target decodes per token, on
    rows that cost a decode each (this CPU's shape), which loses even if every token were accepted (and keeps
    losing when a loaded machine measures plain decoding a few times slower during the request)."""
    _run(session, "river", 8)  # plain decoding measured
    one = session._verify_ms[1]
    session._verify_ms.update({b: one * b for b in range(1, 10)})
    session._draft_ms["draft"] = 10 * one
    out = _run(session, "forest", 12)
    assert out.per_source["draft"]["drafted"] == 0
    assert out.per_source["draft"]["idle_reason"] == PASSED_OVER["no_gain"]


def _dd_picks_the_draft_model(s: Session) -> None:
    fp = s.fingerprint()
    s.set_policy(DynamicDraftPolicy(new_table(fp, draft_wins_narrowly()), fp))


def test_dd_runs_its_choice_without_the_draft_model_when_the_catch_up_cannot_pay(session: Session) -> None:
    _dd_picks_the_draft_model(session)
    first = _run(session, "river", 24, spec=None)  # no prefill speed measured yet: nothing to weigh, the draft runs
    dd = first.dynamic_draft
    assert dd is not None and dd["reason"] == "table_row" and dd["catch_up_ms"] is None
    assert first.settings == DRAFT and first.per_source["draft"]["drafted"] > 0
    assert session.sources["draft"].prefill_ms_per_token is not None  # type: ignore[attr-defined]

    short = _run(session, "forest", 3, spec=None)  # ~250 tokens to prefill to gain on 3 tokens at 48 vs 45 tok/s
    dd = short.dynamic_draft
    assert dd is not None and dd["reason"] == "catch_up" and dd["passed_over"] == DRAFT.label(), dd
    assert dd["applied"] and dd["selected_label"] == LOOKUP.label() and dd["catch_up_ms"] > 0
    assert short.settings == LOOKUP and short.per_source.get("draft", {}).get("drafted", 0) == 0

    session.weigh_catch_up = False  # the choice before: the table's pick runs whatever its draft must prefill
    before = _run(session, "meadow", 3, spec=None)
    assert before.settings == DRAFT and before.dynamic_draft is not None
    assert before.dynamic_draft["reason"] == "table_row" and before.dynamic_draft["catch_up_ms"] is None


def test_the_prefill_speed_is_remembered_across_a_restart(smollm2_path: Path, smollm2_q2k_path: Path) -> None:
    cfg = EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=2048)
    s = Session(cfg)
    try:
        _dd_picks_the_draft_model(s)
        _run(s, "river", 8, spec=None)  # the draft runs and times its prefill; DD's weighing opened the memory
        measured = s.sources["draft"].prefill_ms_per_token  # type: ignore[attr-defined]
        assert measured is not None
    finally:
        s.close()
    again = Session(cfg)
    try:
        _dd_picks_the_draft_model(again)
        short = _run(again, "forest", 3, spec=None)  # a restart's first long prompt is weighed too
        assert short.dynamic_draft is not None and short.dynamic_draft["reason"] == "catch_up", short.dynamic_draft
        assert short.dynamic_draft["catch_up_ms"] > 0
    finally:
        again.close()


def test_dynadraft_generate_reports_the_catch_up_after_a_restart(smollm2_path: Path, smollm2_q2k_path: Path) -> None:
    """Two `dynadraft generate --json` processes, as a user runs them: the first times the draft's prefill (and
    keeps it in the source memory), the second, a new long text for 3 tokens, says DD passed over the draft row."""
    from tests.journeys.helpers import generate_json

    args = ("--model", str(smollm2_path), "--draft", str(smollm2_q2k_path), "--ctx-size", "2048", "--threads", "1")
    s = Session(EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=2048, n_threads=1))
    try:
        _dd_picks_the_draft_model(s)
        store = calibration_store(s.config.model, s.config.draft)
        assert s.policy.table is not None
        store.save(s.policy.table)
    finally:
        s.close()
    first, _ = generate_json(*args, "--prompt", "Say hello to the river.", "--max-tokens", "8", "--temperature", "0")
    assert first["dynamic_draft"]["reason"] == "table_row" and first["speculative"] == DRAFT.to_dict(), first
    second, _ = generate_json(
        *args, "--prompt", f"Summarise this:\n\n{long_text('forest')}", "--max-tokens", "3", "--temperature", "0"
    )
    dd = second["dynamic_draft"]
    assert dd["reason"] == "catch_up" and dd["passed_over"] == DRAFT.label() and dd["catch_up_ms"] > 0, dd
    assert second["speculative"] == LOOKUP.to_dict()


def test_a_draft_after_steps_the_draft_model_sat_out_is_no_sample_of_its_ms_per_token(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On this CPU the adaptive length runs plain steps between drafts, so the draft model's next draft first feeds
    the tokens it missed. Those ms are a catch-up, not a cost of the drafted tokens: the cost model learns draft ms
    per token only from a draft that fed at most STEADY_SYNC tokens first (the cost stop's model takes the same
    rule, Session._observe)."""
    from app.speculative import adaptive, sources

    events: list[tuple[str, int, bool]] = []
    propose, observe = sources.DraftModelSource.propose, adaptive.CostModel.observe

    def spy_propose(self, *a, **k):  # type: ignore[no-untyped-def]
        d = propose(self, *a, **k)
        events.append(("propose", d.synced, d.caught_up))
        return d

    def spy_observe(self, drafted, draft_ms, verify_ms, draft_sample=True):  # type: ignore[no-untyped-def]
        events.append(("observe", drafted, draft_sample))
        observe(self, drafted, draft_ms, verify_ms, draft_sample)

    # Plain steps between drafts, whatever the measured costs say: on a loaded machine the adaptive length
    # sometimes drafted on every step of both requests, so no draft ever caught up and the rule went untested.
    steps = itertools.count()
    next_length = adaptive.AdaptiveLength.next_length

    def every_fourth_step_drafts(self):  # type: ignore[no-untyped-def]
        k = next_length(self)
        return max(k, 1) if next(steps) % 4 == 3 else 0

    monkeypatch.setattr(sources.DraftModelSource, "propose", spy_propose)
    monkeypatch.setattr(adaptive.CostModel, "observe", spy_observe)
    monkeypatch.setattr(adaptive.AdaptiveLength, "next_length", every_fourth_step_drafts)
    spec = SpecSettings("draft", 8, 0, 0.0, adaptive=True)
    _run(session, "rivers", 8, spec)  # the session's first request: verify costs get measured
    for topic in ("tides", "glaciers"):
        _run(session, topic, 40, spec)
    samples = []
    for before, after in zip(events, events[1:], strict=False):
        if before[0] == "propose" and after[0] == "observe" and after[1] > 0:
            samples.append((before[1], after[2]))
    assert any(synced > sources.STEADY_SYNC for synced, _ in samples), samples  # catch-ups happened
    assert all(taken == (synced <= sources.STEADY_SYNC) for synced, taken in samples), samples
