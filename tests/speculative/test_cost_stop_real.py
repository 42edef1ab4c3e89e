"""The cost stop on a real pair (SmolLM2-135M and its own Q2_K build as the draft): greedy output stays exact, and a
confidently-wrong draft source is cut short where drafting it to n_max would pay a verify row for every wrong token."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary, StepEvent
from app.runtime.sampling import SamplingParams
from app.speculative import registry
from app.speculative.exactness import compare
from app.speculative.pool import profile_cost
from app.speculative.settings import PLAIN, SpecSettings
from app.speculative.sources import Draft, SourceEnv, draft_autoregressive

PROMPT = "Write a Python function that parses a CSV line into fields, handling quoted fields. Code only."
# A memory-bound GPU's verify curve (the H200's for the Qwen 1.5B, as tests/speculative/test_pool_real.py): on these
# 2-core CPUs a verify row costs about a decode, so measured costs would rightly stop almost every draft.
GPU_LIKE = profile_cost([1.0, 0.96, 1.1, 1.26, 1.39, 1.52, 1.68, 1.84, 3.0], {"draft": 0.1})
CPU_LIKE = profile_cost([1.0 + 0.6 * i for i in range(17)], {})
WRONG_CONFIDENCE = 0.7  # each drafted token's top-1 probability (llama.cpp's top-10 measure)


def _confident_logits(token: int, n_vocab: int) -> np.ndarray:
    z = np.full(n_vocab, -30.0, dtype=np.float32)
    z[:10] = 0.0
    z[token] = math.log(WRONG_CONFIDENCE * 9 / (1 - WRONG_CONFIDENCE))
    return z


class ConfidentlyWrongSource:
    """Drafts the same rare token again and again with top-1 probability 0.7, through the engine's own drafting loop
    (so p_min and the cost stop apply as to a draft model): never accepted."""

    name: ClassVar[str] = "wrong"
    label: ClassVar[str] = "Confidently wrong"
    needs_draft_model: ClassVar[bool] = False
    cheap_peek: ClassVar[bool] = False

    def __init__(self, n_vocab: int, token: int) -> None:
        self.logits = _confident_logits(token, n_vocab)

    @classmethod
    def create(cls, env: SourceEnv) -> ConfidentlyWrongSource:
        vocab = env.target.vocab
        return cls(vocab.n_vocab, vocab.tokenize(" Zxqv", add_special=False)[0])

    @classmethod
    def calibration_grid(cls, mode: str) -> tuple[SpecSettings, ...]:
        return ()

    def propose(
        self,
        history: Sequence[int],
        n_max: int,
        n_min: int,
        p_min: float,
        sampling: SamplingParams,
        rng: np.random.Generator,
        floors: Sequence[float] | None = None,
    ) -> Draft:
        out = Draft(self.name)
        draft_autoregressive(out, lambda: self.logits, lambda tok: None, n_max, n_min, p_min, sampling, rng, floors)
        return out

    def rollback(self, n_committed: int) -> None:
        """Stateless."""

    def reset(self) -> None:
        """Stateless."""

    def close(self) -> None:
        """Nothing allocated."""


class OldWrongSource(ConfidentlyWrongSource):
    """The same, written before the cost stop: its propose() has no `floors`."""

    name: ClassVar[str] = "oldwrong"

    def propose(  # type: ignore[override]
        self,
        history: Sequence[int],
        n_max: int,
        n_min: int,
        p_min: float,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        return super().propose(history, n_max, n_min, p_min, sampling, rng)


@pytest.fixture(scope="module")
def pair(smollm2_path: Path, smollm2_q2k_path: Path) -> Iterator[Session]:
    registry.register(ConfidentlyWrongSource)
    registry.register(OldWrongSource)
    s = Session(EngineConfig(str(smollm2_path), str(smollm2_q2k_path), n_ctx=1024, n_batch=256))
    try:
        yield s
    finally:
        s.close()
        registry.unregister(OldWrongSource.name)
        registry.unregister(ConfidentlyWrongSource.name)


def _run(s: Session, spec: SpecSettings, n: int = 48, **kw) -> tuple[GenerationSummary, list[StepEvent]]:
    req = GenerationRequest(
        messages=({"role": "user", "content": PROMPT},),
        max_tokens=n,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
        **kw,
    )
    events = list(s.generate(req))
    done = [e for e in events if isinstance(e, DoneEvent)][0].summary
    return done, [e for e in events if isinstance(e, StepEvent)]


def test_cost_stopped_drafts_keep_greedy_output_exact(pair: Session) -> None:
    pair.pool_step_cost = GPU_LIKE
    try:
        plain, _ = _run(pair, PLAIN, collect_margins=True)
        for spec in (SpecSettings("draft", 16, cost_stop=True), SpecSettings("lookup", 16, cost_stop=True)):
            out, steps = _run(pair, spec)
            verdict = compare(plain.tokens, plain.margins, out.tokens)
            assert verdict.acceptable, f"{spec.label()}: {verdict.describe()}"
            assert out.settings == spec and out.dynamic_draft["selected_label"] == spec.label()  # type: ignore[index]
            assert out.timings.draft_n_accepted > 0 or spec.source == "lookup"  # a CSV parser may repeat nothing
            # The profile makes 9 rows cost 3 decodes: the floor for the 8th token is above 1, so no draft passes 7.
            assert max(st.drafted for st in steps) <= 7 < 16
    finally:
        pair.pool_step_cost = None


def test_a_confidently_wrong_source_drafts_far_less_with_the_cost_stop(pair: Session) -> None:
    fixed, steps = _run(pair, SpecSettings("wrong", 8), n=16)
    # Every step drafts to n_max (or to the tokens still wanted), and every token is rejected.
    assert fixed.timings.draft_n_accepted == 0 and [st.drafted for st in steps[:4]] == [8] * 4
    try:
        # A device where a verify row costs 0.6 of a decode: 0.7 pays for one token, 0.49 not for a second.
        pair.pool_step_cost = CPU_LIKE
        out, steps = _run(pair, SpecSettings("wrong", 8, cost_stop=True), n=16)
        assert out.tokens == fixed.tokens and max(st.drafted for st in steps) == 1
        assert out.timings.draft_n * 4 <= fixed.timings.draft_n
        # A source written before the cost stop still runs under it, cut at the ceiling (7 on GPU_LIKE) only.
        pair.pool_step_cost = GPU_LIKE
        old, steps = _run(pair, SpecSettings("oldwrong", 8, cost_stop=True), n=16)
        assert old.tokens == fixed.tokens and 0 < max(st.drafted for st in steps) <= 7
    finally:
        pair.pool_step_cost = None
    # Measured on this CPU: batch sizes are learnt one at a time, never skipping one, and the stop still holds.
    out, _ = _run(pair, SpecSettings("wrong", 8, cost_stop=True), n=16)
    assert out.tokens == fixed.tokens and out.timings.draft_n * 2 <= fixed.timings.draft_n
    assert sorted(pair._verify_ms) == list(range(1, len(pair._verify_ms) + 1))
