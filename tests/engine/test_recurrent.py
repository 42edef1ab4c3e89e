"""Speculative decoding on recurrent memory: the checkpoint/restore rollback path, on a tiny random Mamba.

Recurrent (and hybrid) memory cannot drop a partial range of positions, so after rejected draft tokens the session
restores a checkpoint taken before the verify decode and re-decodes [last] + the accepted tokens. These tests run
that path for real: the model is a 2-layer random-weight Mamba written by tests/engine/tiny_gguf.py (~0.5 MB,
loads in milliseconds). Its text is gibberish, but greedy decoding is deterministic and loops, which gives prompt
lookup drafts that are partly accepted and partly rejected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import llama_cpp as L
import pytest

from app.engine.llama import Context
from app.engine.sampling import SamplingParams
from app.engine.session import EngineConfig, Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.speculative.exactness import compare
from app.speculative.settings import PLAIN, SpecSettings
from tests.engine.tiny_gguf import write_tiny_mamba

GREEDY = SamplingParams(temperature=0.0)
LOOKUP = SpecSettings(source="lookup", n_max=4)
# With this model (seed 3) greedy decoding of this prompt falls into a loop after a few tokens: lookup drafts are
# rejected before the loop and accepted inside it, so the rollback runs several times in one request.
PROMPT = "hello world hello world"


@pytest.fixture(scope="session")
def tiny_mamba_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # mix 0.7: the recurrent state weighs enough that losing it changes the tokens (see the broken-rollback test);
    # out_std 2.0: logits several units apart, so a wrong token is not excused as a near-tie.
    return write_tiny_mamba(tmp_path_factory.mktemp("tiny-mamba") / "tiny-mamba.gguf", seed=3, mix=0.7, out_std=2.0)


def _session(path: Path) -> Session:
    # One thread: these decodes take microseconds, and spinning worker threads only fight other work for the CPU.
    return Session(EngineConfig(model=str(path), n_ctx=512, n_batch=64, n_threads=1))


@pytest.fixture
def session(tiny_mamba_path: Path) -> Iterator[Session]:
    s = _session(tiny_mamba_path)
    yield s
    s.close()


def _raw(prompt: str, **kw) -> GenerationRequest:
    kw.setdefault("max_tokens", 48)
    kw.setdefault("sampling", GREEDY)
    return GenerationRequest(prompt=prompt, **kw)


def _run(session: Session, req: GenerationRequest) -> GenerationSummary:
    done = [ev for ev in session.generate(req) if isinstance(ev, DoneEvent)]
    return done[0].summary


def test_tiny_mamba_is_recurrent_and_cannot_drop_a_partial_range(session: Session) -> None:
    assert session.model.is_recurrent
    assert bool(L.llama_model_is_recurrent(session.model.ptr))
    ctx = session.ctx
    tokens = session.model.vocab.tokenize("the cat sat on the mat and the dog ran", add_special=True)[:10]
    assert len(tokens) == 10
    ctx.prefill(tokens)
    assert not ctx.truncate(5)  # recurrent state has no per-position history to cut back to
    assert ctx.tokens == tokens  # a failed truncate leaves the bookkeeping as it was
    assert ctx.truncate(10)  # nothing to drop: fine
    ctx.clear()
    assert ctx.tokens == []


def test_checkpoint_restores_the_state_exactly(session: Session) -> None:
    ctx = session.ctx
    tokens = session.model.vocab.tokenize(PROMPT, add_special=True)
    ctx.prefill(tokens)
    ctx.decode([8])
    reference = ctx.logits(-1).copy()
    ctx.clear()
    ctx.prefill(tokens)
    checkpoint = ctx.save_state()
    ctx.decode([5, 6, 7])  # advance the state with tokens that will be "rejected"
    assert not ctx.truncate(len(tokens))
    ctx.load_state(checkpoint)
    assert ctx.tokens == tokens
    ctx.decode([8])  # the same decode as for the reference, from the restored state: bit-identical logits
    assert (ctx.logits(-1) == reference).all()
    ctx.clear()


def test_greedy_lookup_speculation_rolls_back_recurrent_state_exactly(session: Session) -> None:
    plain = _run(session, _raw(PROMPT, speculative=PLAIN, collect_margins=True))
    spec = _run(session, _raw(PROMPT, speculative=LOOKUP))
    assert len(plain.tokens) == 48
    t = spec.timings
    assert t.draft_n > t.draft_n_accepted > 0, (t.draft_n, t.draft_n_accepted)  # rejections: the rollback ran
    assert spec.steps < len(spec.tokens)  # accepted drafts: fewer verifies than tokens
    verdict = compare(plain.tokens, plain.margins, spec.tokens)
    assert verdict.acceptable, verdict.describe()


def test_a_broken_rollback_is_caught(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above bites: restoring an empty state instead of the checkpoint gives confidently wrong tokens."""
    plain = _run(session, _raw(PROMPT, speculative=PLAIN, collect_margins=True))

    def lose_state(self: Context, state: tuple[bytes, list[int]]) -> None:
        L.llama_memory_seq_rm(self.mem, 0, -1, -1)
        self.tokens = list(state[1])

    monkeypatch.setattr(Context, "load_state", lose_state)
    broken = _run(session, _raw(PROMPT, speculative=LOOKUP))
    assert broken.timings.draft_n > broken.timings.draft_n_accepted
    assert not compare(plain.tokens, plain.margins, broken.tokens).acceptable


def test_prefix_sharing_request_re_prefills_and_equals_a_fresh_session(tiny_mamba_path: Path) -> None:
    first = _raw(PROMPT, speculative=LOOKUP)
    follow = _raw(PROMPT + " the cat sat on the mat", speculative=LOOKUP, max_tokens=32)
    warm = _session(tiny_mamba_path)
    try:
        s1 = _run(warm, first)
        assert s1.timings.draft_n > s1.timings.draft_n_accepted  # the cache was rolled back before this request
        s2 = _run(warm, follow)
        again = _run(warm, follow)  # same prompt again: the prefix can't be cut out of a recurrent state either
    finally:
        warm.close()
    # The follow-up shares the first prompt, but the cache also holds generated tokens past the shared prefix,
    # and recurrent memory cannot drop them: the session clears and re-prefills everything.
    assert s2.timings.cache_n == 0 and s2.timings.prompt_n == s2.prompt_tokens
    assert again.timings.cache_n == 0
    fresh = _session(tiny_mamba_path)
    try:
        s3 = _run(fresh, follow)
    finally:
        fresh.close()
    assert len(s3.tokens) > 0
    assert s2.tokens == s3.tokens == again.tokens
