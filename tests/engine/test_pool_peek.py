"""Prompt lookup's peeked proposal is scored past what it drafted, through a real Session: after a wholly accepted
draft, the target's own next token tests the proposal's next position, so a lookup length that settled short on
this device's costs can still learn that the copy goes on."""

from __future__ import annotations

from pathlib import Path

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.runtime.sampling import SamplingParams
from app.speculative.settings import SpecSettings

CODE = "\n".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(6))
COPY = ({"role": "user", "content": f"Repeat this code exactly:\n\n```python\n{CODE}```"},)
ROWS = 4  # verify batches up to this many rows are priced nearly flat, larger ones as dear as 50 decodes


def test_a_wholly_accepted_lookup_draft_tests_the_next_proposed_position(
    smollm2_path: Path, smollm2_q2k_path: Path, _isolated_home: Path
) -> None:
    s = Session(EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=1024))
    try:
        req = GenerationRequest(
            messages=COPY, max_tokens=48, sampling=SamplingParams(temperature=0.0), speculative=SpecSettings("pool", 8)
        )
        list(s.generate(req))  # verify batch sizes measured
        one = min(s._verify_ms.values())
        # A memory-bound device's rows up to ROWS, then a cliff (the H200's curves have one between 8 and 10 rows):
        # the pool's lookup drafts at most ROWS - 1 tokens, whatever it has learnt.
        s._verify_ms.update({b: one * (1 + 0.02 * (b - 1)) if b <= ROWS else 50 * one for b in range(1, 10)})
        s._draft_ms["draft"] = 10 * one  # the pool's other source loses even when always right: lookup's request
        done = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
        assert done.per_source["lookup"]["drafted"] > 0
        store = s._memory
        assert store is not None
        store.flush()
        (lookup,) = [arms["lookup"] for arms in store.classes().values() if "lookup" in arms]
    finally:
        s.close()
    # Drafts of at most ROWS - 1 tokens test positions 0..ROWS-2 themselves; position ROWS - 1 is known only from the
    # target's token after a wholly accepted draft of a longer proposal (the copy goes on past every draft here).
    assert len(lookup.acceptance) >= ROWS
    assert lookup.acceptance[ROWS - 1] > 0.5
