"""Speculative by default: with no table and no request setting, the demo model (no draft, no MTP head) drafts with
prompt lookup where its answer repeats the prompt, and where it finds nothing it decodes as plain decoding does."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.runtime.sampling import SamplingParams
from app.speculative.exactness import compare
from app.speculative.settings import PLAIN, SpecSettings

TEXT = (
    "The quick brown fox jumps over the lazy dog. The dog does not move; it only opens one eye and watches the fox "
    "run into the woods behind the old farmhouse, where the apple trees grow."
)
EDIT = f"Repeat this text exactly, word for word:\n\n{TEXT}"
CHAT = "Name three colours and say which one you like best."


@pytest.fixture(scope="module")
def session(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Session:
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=1024, n_batch=128))
    yield s  # type: ignore[misc]
    s.close()


def _run(session: Session, message: str, spec: SpecSettings | None) -> GenerationSummary:
    req = GenerationRequest(
        messages=({"role": "user", "content": message},),
        max_tokens=48,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
        collect_margins=True,
    )
    return next(e for e in session.generate(req) if isinstance(e, DoneEvent)).summary


def test_the_demo_model_drafts_with_lookup_by_default_where_the_answer_repeats_the_prompt(session: Session) -> None:
    out = _run(session, EDIT, None)
    dd = out.dynamic_draft
    assert dd is not None and dd["reason"] == "no_table" and dd["default_basis"] == "lookup default"
    assert out.settings == SpecSettings("lookup", n_max=8)
    assert out.timings.draft_n > 0 and out.timings.draft_n_accepted > 0
    plain = _run(session, EDIT, PLAIN)
    assert compare(plain.tokens, plain.margins, out.tokens).acceptable


def test_where_lookup_finds_nothing_the_default_decodes_as_plain_does(session: Session) -> None:
    out = _run(session, CHAT, None)
    plain = _run(session, CHAT, PLAIN)
    assert out.settings.source == "lookup" and compare(plain.tokens, plain.margins, out.tokens).acceptable
    # Prompt lookup proposes only where the answer repeats the prompt: on a chat that is seldom, and every step it
    # has nothing to propose is a plain decode.
    assert out.timings.draft_n_accepted < len(out.tokens) // 2
