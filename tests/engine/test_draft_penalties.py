"""A draft scores its proposals with the penalties and DRY the target applies, so a penalised request keeps its
acceptance: with the target itself as the draft, greedy, nearly every drafted token is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN, SpecSettings

COPY = "apple, pear, plum, fig, apple, pear, plum, fig, apple, pear, plum, fig, apple,"


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(repeat_penalty=1.5, presence_penalty=0.5),
        SamplingParams(dry_multiplier=2.0, dry_allowed_length=2),
    ],
    ids=["repeat-penalty", "dry"],
)
def test_a_self_draft_is_accepted_under_penalties(smollm2_path: Path, sampling: SamplingParams) -> None:
    session = Session(EngineConfig(model=str(smollm2_path), draft=str(smollm2_path), n_ctx=1024, n_threads=1))
    try:
        runs = {}
        for name, spec in (("plain", PLAIN), ("draft", SpecSettings(source="draft", n_max=6, p_min=0.0))):
            request = GenerationRequest(
                prompt=COPY, max_tokens=32, sampling=sampling, speculative=spec, cache_prompt=False
            )
            runs[name] = [e for e in session.generate(request) if isinstance(e, DoneEvent)][0].summary
    finally:
        session.close()
    t = runs["draft"].timings
    assert t.draft_n >= 20
    # The same model drafts: only llama.cpp's batch-size logit shifts at near-ties may reject a token.
    assert t.draft_n_accepted >= 0.9 * t.draft_n, (t.draft_n_accepted, t.draft_n)
    assert runs["draft"].tokens[:8] == runs["plain"].tokens[:8]  # and the reply is the penalised one
