"""The pool weighs a draft model's catch-up (prefilling text it has not seen) against the tokens still wanted, on a
real Session: the draft model measures its prefill speed, a reply too short to win the catch-up back leaves it
untried and says why, and the same request with the catch-up ignored (the choice before) tries it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.session import EngineConfig, Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.runtime.sampling import SamplingParams
from app.speculative.settings import SpecSettings

POOL = SpecSettings("pool", 8)


def _text(topic: str) -> str:
    """About 500 tokens of prose on `topic`: a prompt the draft model has not seen."""
    return " ".join(f"Note {i} on {topic}: the {topic} changes with the season and the weather." for i in range(30))


def _run(s: Session, topic: str, max_tokens: int) -> GenerationSummary:
    req = GenerationRequest(
        messages=({"role": "user", "content": f"Summarise this:\n\n{_text(topic)}"},),
        max_tokens=max_tokens,
        sampling=SamplingParams(temperature=0.0),
        speculative=POOL,
    )
    return [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary


@pytest.fixture()
def session(smollm2_path: Path, smollm2_q2k_path: Path) -> Iterator[Session]:
    # No source memory: each request's pool starts cold, so the draft model's warm-up is what is at stake.
    cfg = EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=2048, source_memory=False)
    s = Session(cfg)
    yield s
    s.close()


def test_a_reply_too_short_to_win_back_the_catch_up_leaves_the_draft_model_untried(session: Session) -> None:
    first = _run(session, "river", 24)  # nothing measured yet: the draft model warms up and catches up
    assert first.per_source["draft"]["drafted"] > 0
    draft = session.sources["draft"]
    assert draft.prefill_ms_per_token is not None and draft.prefill_ms_per_token > 0  # type: ignore[attr-defined]

    # The 135M pair costs about the same per token, so whether this draft could pay at all is a near-tie on this CPU
    # (the pool's other rule). Price its drafting as a small draft's (a tenth of a target decode) so that only the
    # catch-up decides.
    session._draft_ms["draft"] = 0.1 * session._verify_ms[1]
    short = _run(session, "forest", 3)  # ~500 new tokens to prefill for at most 2 drafted-for tokens
    assert short.per_source["draft"]["drafted"] == 0
    assert short.per_source["draft"]["idle_reason"].startswith("not tried: prefilling the text it had not seen")

    session.weigh_catch_up = False  # the same request as the pool chose before: the draft's warm-up runs
    session._draft_ms["draft"] = 0.1 * session._verify_ms[1]
    before = _run(session, "meadow", 3)
    assert before.per_source["draft"]["drafted"] > 0
    assert "idle_reason" not in before.per_source["draft"]
