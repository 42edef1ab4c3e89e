"""Speculative decoding on recurrent and hybrid memory: both rollback paths, on tiny random models.

Recurrent (and hybrid) memory has no per-position history. Two ways roll it back after rejected draft tokens:
llama.cpp's per-token state snapshots of the last decode (n_rs_seq; the default where the architecture has them:
a plain seq_rm), or a checkpoint taken before the verify decode, restored, then [last] + the accepted tokens
re-decoded (models without snapshots, drafts deeper than the window, `recurrent_snapshots=0`). These tests
run both for real on two models written by tests/engine/tiny_gguf.py (< 1 MB each, load in milliseconds):

* "mamba": a 2-layer random Mamba, pure recurrent memory (llama_model_is_recurrent);
* "qwen35": a 4-layer random Qwen3.5, the hybrid that users run: gated delta-net layers (recurrent state) and
  gated full-attention layers (KV cache) interleaved (llama_model_is_hybrid). A rollback must restore both.

Their text is gibberish, but greedy decoding is deterministic and loops, which gives prompt lookup drafts that are
partly accepted and partly rejected; a test-only source drafts the target's own continuation (the target as its
own draft model) with one token changed, so that every step rolls back after accepting 0..n_max-1 tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp as L
import numpy as np
import pytest

from app.engine.config import EngineConfig
from app.engine.run import top2_margin
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary, StepEvent
from app.runtime.llama import Context, LlamaError
from app.runtime.sampling import SamplingParams
from app.speculative.exactness import Exactness, compare
from app.speculative.settings import PLAIN, SpecSettings
from app.speculative.sources import Draft, DraftSource
from tests.engine.conftest import TinyModel

GREEDY = SamplingParams(temperature=0.0)
LOOKUP = SpecSettings(source="lookup", n_max=4)


def _session(path: Path, snapshots: int = EngineConfig.recurrent_snapshots) -> Session:
    # One thread: these decodes take microseconds, and spinning worker threads only fight other work for the CPU.
    return Session(EngineConfig(model=str(path), n_ctx=512, n_batch=64, n_threads=1, recurrent_snapshots=snapshots))


# Snapshot counts per rollback path: the default window; none (checkpoints only); a window of 2, shallower than the
# 4-token drafts below, so deep steps take the checkpoint and shallow ones the snapshots in one request.
SNAPSHOTS = {"snapshots": EngineConfig.recurrent_snapshots, "checkpoint": 0, "window2": 2}


@pytest.fixture(params=list(SNAPSHOTS))
def rollback(request: pytest.FixtureRequest) -> str:
    """Which rollback path a session uses (see the module docstring)."""
    return str(request.param)


@pytest.fixture
def session(tiny: TinyModel, rollback: str) -> Iterator[Session]:
    s = _session(tiny.path, SNAPSHOTS[rollback])
    yield s
    s.close()


@pytest.fixture
def checkpointing(tiny: TinyModel) -> Iterator[Session]:
    """A session that rolls back from checkpoints only (for the tests that break save/load on purpose)."""
    s = _session(tiny.path, snapshots=0)
    yield s
    s.close()


def _raw(prompt: str, **kw) -> GenerationRequest:
    kw.setdefault("max_tokens", 48)
    kw.setdefault("sampling", GREEDY)
    return GenerationRequest(prompt=prompt, **kw)


def _events(session: Session, req: GenerationRequest) -> tuple[GenerationSummary, list[StepEvent]]:
    events = list(session.generate(req))
    done = [ev for ev in events if isinstance(ev, DoneEvent)]
    return done[0].summary, [ev for ev in events if isinstance(ev, StepEvent)]


def _run(session: Session, req: GenerationRequest) -> GenerationSummary:
    return _events(session, req)[0]


class _OneWrongToken:
    """The draft model source, with one drafted token changed, at a position that rotates step by step.

    The draft is the target itself, so it proposes the target's own greedy continuation: the verifier accepts the
    tokens before the changed one and rejects the rest, and every step rolls the memory back after accepting 0, 1,
    .., n_max-1 tokens (a replay of every length). The draft context is hybrid/recurrent too: it rolls back to its
    own checkpoint, taken at the committed history before drafting (see DraftModelSource).
    """

    name = "draft"

    def __init__(self, inner: DraftSource, n_vocab: int) -> None:
        self.inner = inner
        self.n_vocab = n_vocab
        self.n_proposed = 0

    def propose(self, *args: Any) -> Draft:
        out = self.inner.propose(*args)
        if out.tokens:
            j = self.n_proposed % len(out.tokens)
            out.tokens[j] = 3 + (out.tokens[j] - 2) % (self.n_vocab - 3)  # another token, never <unk>/<s>/</s>
            self.n_proposed += 1
        return out

    def rollback(self, n_committed: int) -> None:
        self.inner.rollback(n_committed)

    def reset(self) -> None:
        self.inner.reset()

    def close(self) -> None:  # DraftSource.close (Session.close closes every source)
        self.inner.close()


ONE_WRONG = SpecSettings(source="draft", n_max=4, p_min=0.0)


@pytest.fixture
def self_drafting(tiny: TinyModel, rollback: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Session]:
    """A session whose draft model is the target itself, drafting through _OneWrongToken."""
    cfg = EngineConfig(
        model=str(tiny.path),
        draft=str(tiny.path),
        n_ctx=512,
        n_batch=64,
        n_threads=1,
        recurrent_snapshots=SNAPSHOTS[rollback],
    )
    s = Session(cfg)
    monkeypatch.setitem(s.sources, "draft", _OneWrongToken(s.sources["draft"], s.model.vocab.n_vocab))
    yield s
    s.close()


def test_tiny_model_memory_cannot_drop_a_partial_range(tiny: TinyModel, checkpointing: Session) -> None:
    session = checkpointing
    assert session.ctx.n_rs_seq == 0
    assert session.model.meta("general.architecture") == tiny.name
    assert session.model.is_recurrent  # the engine's flag: take checkpoints before verifying
    ptr = session.model.ptr
    if tiny.name == "mamba":
        assert L.llama_model_is_recurrent(ptr) and not L.llama_model_is_hybrid(ptr)
    else:  # attention KV cache and recurrent state side by side
        assert L.llama_model_is_hybrid(ptr) and not L.llama_model_is_recurrent(ptr)
        # Layers: delta-net, attention, delta-net, attention.
        assert session.model.meta("qwen35.block_count") == "4"
        assert session.model.meta("qwen35.full_attention_interval") == "2"
    ctx = session.ctx
    tokens = session.model.vocab.tokenize("the cat sat on the mat and the dog ran", add_special=True)[:10]
    assert len(tokens) == 10
    ctx.prefill(tokens)
    assert not L.llama_memory_seq_rm(ctx.mem, 0, 5, -1)  # recurrent state has no per-position history
    assert not ctx.truncate(5)
    assert ctx.tokens == tokens  # a failed truncate leaves the bookkeeping as it was
    assert ctx.truncate(10)  # nothing to drop: fine
    ctx.clear()
    assert ctx.tokens == []


def _fresh_next_logits(session: Session, tokens: list[int], nxt: int) -> np.ndarray:
    """The logits after `tokens` + `nxt` in a fresh context (prefill, then one decode)."""
    fresh = Context(session.model, session.ctx.params)
    try:
        fresh.prefill(tokens)
        fresh.decode([nxt])
        return fresh.logits(-1).copy()
    finally:
        fresh.close()


def test_snapshots_drop_the_last_decode_in_place_and_nothing_else(tiny: TinyModel) -> None:
    """Inside the window (positions of the last decode, at most n_rs_seq) a seq_rm restores the state after the
    kept tokens; outside it, or twice without a decode between, truncate refuses (llama.cpp would silently use a
    stale snapshot there) and the memory is left as it was."""
    session = _session(tiny.path)
    try:
        ctx = session.ctx
        if ctx.n_rs_seq == 0:
            pytest.skip(f"llama.cpp keeps no recurrent snapshots for {tiny.name}")
        assert ctx.n_rs_seq == EngineConfig.recurrent_snapshots == 8  # the default window, below the draft cap 16
        tokens = session.model.vocab.tokenize("the cat sat on the mat and the dog ran", add_special=True)[:10]
        reference = _fresh_next_logits(session, tokens[:6], 8)
        # What the check below would see if the rollback kept the dropped tokens in the state: far off.
        assert float(np.abs(_fresh_next_logits(session, tokens, 8) - reference).max()) > 1.0
        ctx.prefill(tokens)  # one decode of 10 tokens: states after each of them are kept
        assert ctx.truncate(6)
        assert ctx.tokens == tokens[:6]
        assert not ctx.truncate(5)  # a snapshot is used once: no second rollback before a decode
        ctx.decode([8])
        # Batch sizes differ (10 then 1 against 6 then 1): llama.cpp's numerics, not the state, may move the logits.
        gap = float(np.abs(ctx.logits(-1) - reference).max())
        assert gap < 1e-2, gap
        ctx.decode([9])  # a one-token decode keeps only the state after it: nothing older can be dropped in place
        assert not ctx.truncate(len(ctx.tokens) - 1)
        assert ctx.truncate(0) and ctx.tokens == []  # dropping everything is always fine
    finally:
        session.close()


def test_snapshot_rollback_saves_no_checkpoint(tiny: TinyModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """With snapshots the speculative loop never saves the memory: the rollback is the seq_rm alone."""
    session = _session(tiny.path)
    try:
        if session.ctx.n_rs_seq == 0:
            pytest.skip(f"llama.cpp keeps no recurrent snapshots for {tiny.name}")
        saves: list[int] = []
        original = Context.save_state

        def counting(self: Context) -> tuple[bytes, list[int]]:
            if self is session.ctx:
                saves.append(len(self.tokens))
            return original(self)

        monkeypatch.setattr(Context, "save_state", counting)
        plain = _run(session, _raw(tiny.prompt, speculative=PLAIN, collect_margins=True))
        during: list[int] = []  # saves between the first step and the end (the cache's own saves come before)
        spec = None
        for ev in session.generate(_raw(tiny.prompt, speculative=LOOKUP)):
            if isinstance(ev, StepEvent) and not during:
                during.append(len(saves))
            if isinstance(ev, DoneEvent):
                spec = ev.summary
                during.append(len(saves))
        assert spec is not None
        assert spec.timings.draft_n > spec.timings.draft_n_accepted > 0  # rejections: rollbacks ran
        assert during[-1] == during[0], saves
        verdict = compare(plain.tokens, plain.margins, spec.tokens)
        assert verdict.acceptable, verdict.describe()
    finally:
        session.close()


def test_checkpoint_restores_the_state_exactly(tiny: TinyModel, checkpointing: Session) -> None:
    session = checkpointing
    ctx = session.ctx
    tokens = session.model.vocab.tokenize(tiny.prompt, add_special=True)
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


def test_greedy_lookup_speculation_rolls_back_exactly(tiny: TinyModel, session: Session) -> None:
    plain = _run(session, _raw(tiny.prompt, speculative=PLAIN, collect_margins=True))
    spec = _run(session, _raw(tiny.prompt, speculative=LOOKUP))
    assert len(plain.tokens) == 48
    t = spec.timings
    assert t.draft_n > t.draft_n_accepted > 0, (t.draft_n, t.draft_n_accepted)  # rejections: the rollback ran
    assert spec.steps < len(spec.tokens)  # accepted drafts: fewer verifies than tokens
    verdict = compare(plain.tokens, plain.margins, spec.tokens)
    assert verdict.acceptable, verdict.describe()


def test_a_rollback_at_every_step_and_every_depth_is_exact(self_drafting: Session, tiny: TinyModel) -> None:
    plain = _run(self_drafting, _raw(tiny.prompt, speculative=PLAIN, collect_margins=True))
    spec, steps = _events(self_drafting, _raw(tiny.prompt, speculative=ONE_WRONG))
    verdict = compare(plain.tokens, plain.margins, spec.tokens)
    assert verdict.acceptable, verdict.describe()
    drafted = [(s.drafted, s.accepted) for s in steps if s.drafted]
    # Every full-depth draft rejected its wrong token, after accepting each possible number of tokens before it.
    assert all(a < d for d, a in drafted), drafted
    assert {a for d, a in drafted if d == ONE_WRONG.n_max} == set(range(ONE_WRONG.n_max)), drafted
    assert all(s.drafted for s in steps[:-1])  # a draft at every step (the last may have no room)
    assert len(drafted) >= 8


def test_the_state_after_rollbacks_continues_like_a_fresh_context(self_drafting: Session, tiny: TinyModel) -> None:
    """What a request leaves in the memory (after many restores and replays) is the state of its tokens."""
    gap, verdict = _continue_after_rollbacks(self_drafting, tiny.prompt)
    # The first continuation rows differ only by batch-size numerics: measured 2e-5 (Mamba) and 5e-5 (Qwen3.5) on
    # logits spanning ~90 units, against 1.9 and 13.6 when the restore loses the state (the broken-rollback test).
    assert gap < 1e-2
    assert verdict.acceptable, verdict.describe()


def _continue_after_rollbacks(session: Session, prompt: str) -> tuple[float, Exactness]:
    """Run a request that ends in rollbacks, then continue greedily from the memory it left and from a fresh context
    prefilled with the same tokens: the largest logit gap on the first row and the tokens' exactness verdict."""
    spec, steps = _events(session, _raw(prompt, speculative=ONE_WRONG))
    assert sum(s.accepted < s.drafted for s in steps[-3:]) >= 2 and spec.finish_reason == "length"
    committed = session.format_prompt(_raw(prompt)) + list(spec.tokens)
    ctx = session.ctx
    assert ctx.tokens == committed[:-1]  # the last token is committed but not decoded yet
    fresh = Context(session.model, ctx.params)
    try:
        fresh.prefill(committed[:-1])  # the same tokens, in one batch
        expected, margins, expected_row = _greedy_continue(fresh, committed[-1], 24)
    finally:
        fresh.close()
    got, _, got_row = _greedy_continue(ctx, committed[-1], 24)
    return float(np.abs(got_row - expected_row).max()), compare(expected, margins, got)


def _greedy_continue(ctx: Context, token: int, n: int) -> tuple[list[int], list[float], np.ndarray]:
    """n greedy tokens after `token`, one decode each, with the top-2 margins and the first row's logits."""
    out: list[int] = []
    margins: list[float] = []
    first = None
    for _ in range(n):
        ctx.decode([token])
        logits = ctx.logits(-1)
        first = logits.copy() if first is None else first
        margins.append(top2_margin(logits))
        token = int(np.argmax(logits))
        out.append(token)
    assert first is not None
    return out, margins, first


@pytest.mark.parametrize("rollback", ["checkpoint"])
def test_a_broken_rollback_is_caught(
    tiny: TinyModel, session: Session, self_drafting: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks above bite: restoring an empty state instead of the checkpoint gives confidently wrong tokens,
    and leaves a memory that no longer continues like its tokens."""
    plain = _run(session, _raw(tiny.prompt, speculative=PLAIN, collect_margins=True))

    def lose_state(self: Context, state: tuple[bytes, list[int]]) -> None:
        L.llama_memory_seq_rm(self.mem, 0, -1, -1)
        self.tokens = list(state[1])

    monkeypatch.setattr(Context, "load_state", lose_state)
    broken = _run(session, _raw(tiny.prompt, speculative=LOOKUP))
    assert broken.timings.draft_n > broken.timings.draft_n_accepted
    assert not compare(plain.tokens, plain.margins, broken.tokens).acceptable
    broken_one_wrong = _run(self_drafting, _raw(tiny.prompt, speculative=ONE_WRONG))
    assert not compare(plain.tokens, plain.margins, broken_one_wrong.tokens).acceptable
    gap, _ = _continue_after_rollbacks(self_drafting, tiny.prompt)
    assert gap > 1.0


@pytest.mark.parametrize("rollback", ["checkpoint"])
@pytest.mark.parametrize("failing", ["save_state", "load_state"])
def test_impossible_rollback_turns_speculation_off_with_a_reason(
    tiny: TinyModel, session: Session, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """If the memory can't be checkpointed or restored, the output stays exact and speculation stops, saying why."""
    plain = _run(session, _raw(tiny.prompt, speculative=PLAIN, collect_margins=True))

    def fail(self: Context, *_: object) -> None:
        raise LlamaError(f"{failing} refused (test)")

    monkeypatch.setattr(Context, failing, fail)
    assert session.speculation_disabled_reason is None
    spec, steps = _events(session, _raw(tiny.prompt, speculative=LOOKUP))
    reason = session.speculation_disabled_reason
    assert reason is not None and f"{failing} refused (test)" in reason
    assert ("checkpoint" if failing == "save_state" else "rollback") in reason
    verdict = compare(plain.tokens, plain.margins, spec.tokens)
    assert verdict.acceptable, verdict.describe()
    # Nothing was drafted after the failure: a failed checkpoint verifies no draft at all, a failed restore ends
    # drafting at the step that needed it (its memory rebuilt from the committed tokens).
    drafted = [i for i, s in enumerate(steps) if s.drafted]
    if failing == "save_state":
        assert drafted == []
    else:
        assert drafted and steps[drafted[-1]].accepted < steps[drafted[-1]].drafted
        assert all(s.accepted == s.drafted for s in steps[: drafted[-1]])
    again = _run(session, _raw(tiny.prompt, speculative=LOOKUP))  # later requests: plain decoding
    assert again.settings.is_plain and again.timings.draft_n == 0
    assert spec.dynamic_draft["speculation_disabled"] == reason  # responses say why (HTTP, CLI --json, GUI)
    assert again.dynamic_draft["speculation_disabled"] == reason
    assert again.tokens == spec.tokens


def test_prefix_sharing_request_resumes_from_a_checkpoint_and_equals_a_fresh_session(tiny: TinyModel) -> None:
    """The conversation cache's checkpoint rule: the state saved at the end of the first prompt is restored for a
    request that extends that prompt, and only the new tokens are prefilled; the output matches a fresh session."""
    first = _raw(tiny.prompt, speculative=LOOKUP)
    follow = _raw(tiny.prompt + " the cat sat on the mat", speculative=LOOKUP, max_tokens=32)
    warm = _session(tiny.path)
    try:
        s1 = _run(warm, first)
        assert s1.timings.draft_n > s1.timings.draft_n_accepted  # the memory was rolled back during this request
        s2 = _run(warm, follow)
        again = _run(warm, follow)  # same prompt again: the generated tokens can't be cut out of a recurrent state,
    finally:  # but the first prompt's checkpoint is still there
        warm.close()
    assert s2.timings.cache_n == again.timings.cache_n == s1.prompt_tokens
    assert s2.timings.prompt_n == s2.prompt_tokens - s1.prompt_tokens
    fresh = _session(tiny.path)
    try:
        s3 = _run(fresh, _raw(follow.prompt or "", speculative=PLAIN, max_tokens=32, collect_margins=True))
    finally:
        fresh.close()
    assert s3.timings.cache_n == 0 and len(s3.tokens) > 0
    for got in (s2, again):  # restored + 6 tokens vs 23 tokens in one batch: judged at near-ties
        verdict = compare(s3.tokens, s3.margins, got.tokens)
        assert verdict.acceptable, verdict.describe()
