"""The conversation cache: restored states continue exactly, across turns, chats and restarts, on every memory type.

Attention KV (SmolLM2) and recurrent/hybrid memory (the tiny Mamba and Qwen3.5 of tiny_gguf.py) for plain,
draft-model and prompt-lookup runs. "Exact" has two meanings here: a restored state is bit-identical to the state
that was saved (same logits as the context that never left, given the same later batches), and compared with one
fresh prefill of all the tokens the outputs agree up to llama.cpp's batch-split numerics (the near-tie rule).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.engine.cache import Entry, PromptCache, budget_bytes, default_budget, reusable
from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.runtime.llama import Context
from app.runtime.sampling import SamplingParams
from app.speculative.exactness import compare
from app.speculative.settings import PLAIN, SpecSettings
from tests.engine.conftest import TinyModel

GREEDY = SamplingParams(temperature=0.0)
LOOKUP = SpecSettings(source="lookup", n_max=4)
DRAFT = SpecSettings(source="draft", n_max=4, p_min=0.0)
TINY_A = "hello world hello world the cat sat on the mat and the dog ran to a red one"
TINY_B = "copy paste data list one two three four five up down left right yes no blue green"


# -- bookkeeping (pure) ------------------------------------------------------------------------------------------------
def _entry(tokens: list[int], size: int, owner: str = "target") -> Entry:
    return Entry(owner, tuple(tokens), b"x" * size)


def test_reusable_prefix_rules() -> None:
    # Attention KV drops any suffix: a common prefix counts; recurrent state must be a whole prefix.
    assert reusable([1, 2, 3, 9], [1, 2, 3, 4, 5], limit=4, recurrent=False) == 3
    assert reusable([1, 2, 3, 9], [1, 2, 3, 4, 5], limit=4, recurrent=True) == 0
    assert reusable([1, 2, 3], [1, 2, 3, 4, 5], limit=4, recurrent=True) == 3
    assert reusable([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], limit=4, recurrent=True) == 0  # the last token is decoded
    assert reusable([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], limit=4, recurrent=False) == 4


def test_lru_eviction_under_the_byte_budget_and_checkpoint_chains() -> None:
    store = PromptCache(budget=1000)
    a = _entry([1, 2, 3], 300)
    b = _entry([7, 8, 9], 300)
    store.put(a, max_chain=4)
    store.put(b, max_chain=4)
    store.touch(a)  # a used more recently than b
    c = _entry([4, 5, 6], 300)
    store.put(c, max_chain=4)
    assert store.bytes_held <= 1000 and store.stats.evictions == 0
    store.put(_entry([10, 11], 300), max_chain=4)
    assert b not in store.entries and a in store.entries and store.stats.evictions == 1  # the LRU one went
    # A conversation's checkpoints: at most max_chain prefixes of each other are kept (the oldest dropped).
    chain = PromptCache(budget=10_000)
    for n in range(1, 7):
        chain.put(_entry(list(range(n * 10)), 10), max_chain=3)
    assert sorted(len(e.tokens) for e in chain.entries) == [40, 50, 60]
    # Attention (max_chain 1): a longer state replaces its prefixes.
    attn = PromptCache(budget=10_000)
    attn.put(_entry([1, 2], 10), max_chain=1)
    attn.put(_entry([1, 2, 3, 4], 10), max_chain=1)
    assert [e.tokens for e in attn.entries] == [(1, 2, 3, 4)]
    assert attn.best("target", [1, 2, 3, 9], limit=3, recurrent=False)[1] == 3
    assert attn.best("draft", [1, 2, 3, 9], limit=3, recurrent=False) == (None, 0)  # per context
    # A state bigger than the whole budget is not kept (and evicts nothing).
    assert attn.put(_entry([5], 20_000), max_chain=1) and len(attn.entries) == 1


def test_budget_from_flag_or_free_memory() -> None:
    assert budget_bytes(0) == 0
    assert budget_bytes(64) == 64 * 1024 * 1024
    assert budget_bytes(None) == budget_bytes(-1) > 0
    assert default_budget(4 * 1024**3) == 1024**3  # a quarter of what is free...
    assert default_budget(1024**4) == 8192 * 1024 * 1024  # ...at most llama-server's 8 GiB


# -- real models -------------------------------------------------------------------------------------------------------
def _run(session: Session, req: GenerationRequest) -> GenerationSummary:
    return [ev for ev in session.generate(req) if isinstance(ev, DoneEvent)][0].summary


def _raw(prompt: str, **kw) -> GenerationRequest:
    kw.setdefault("max_tokens", 24)
    kw.setdefault("sampling", GREEDY)
    return GenerationRequest(prompt=prompt, **kw)


def _tiny_session(tiny: TinyModel, **kw) -> Session:
    return Session(EngineConfig(model=str(tiny.path), n_ctx=512, n_batch=64, n_threads=1, **kw))


@pytest.fixture
def tiny_session(tiny: TinyModel) -> Iterator[Session]:
    s = _tiny_session(tiny)
    yield s
    s.close()


def _restored_vs_reference(session: Session, a: list[int], b: list[int], suffix: list[int]) -> tuple[bool, float]:
    """Save the state after `a`, overwrite it with conversation `b`, come back with `a + suffix`: whether its
    logits are bit-identical to a context that prefilled `a` then `suffix` without leaving, and the largest gap
    to one fresh prefill of `a + suffix`."""
    cache = session.cache.target
    ctx = session.ctx
    ctx.clear()
    ctx.prefill(a)
    cache.save()
    assert cache.prepare(b, len(b) - 1) == 0
    ctx.prefill(b)
    prompt = a + suffix
    assert cache.prepare(prompt, len(prompt) - 1) == len(a)
    ctx.prefill(suffix)
    restored = ctx.logits(-1).copy()
    same_path = Context(session.model, ctx.params)
    one_batch = Context(session.model, ctx.params)
    try:
        same_path.prefill(a)
        same_path.prefill(suffix)
        one_batch.prefill(prompt)
        return bool((same_path.logits(-1) == restored).all()), float(np.abs(one_batch.logits(-1) - restored).max())
    finally:
        same_path.close()
        one_batch.close()


def test_restored_recurrent_state_gives_the_same_next_token_logits(tiny: TinyModel, tiny_session: Session) -> None:
    vocab = tiny_session.model.vocab
    a = vocab.tokenize(TINY_A, add_special=True)
    b = vocab.tokenize(TINY_B, add_special=True)
    identical, gap = _restored_vs_reference(tiny_session, a, b, vocab.tokenize(" yes no", add_special=False))
    assert identical
    assert gap < 1e-2  # batch-split numerics only (see test_recurrent: a lost state gives gaps > 1)


def test_restored_kv_gives_the_same_next_token_logits(smollm2_path: Path) -> None:
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=512, n_batch=64, n_threads=1))
    try:
        vocab = s.model.vocab
        a = vocab.tokenize("The capital of France is Paris. The capital of Spain is", add_special=True)
        b = vocab.tokenize("def add(x, y):\n    return x + y\n\nprint(add(2, 3))", add_special=True)
        identical, gap = _restored_vs_reference(s, a, b, vocab.tokenize(" Madrid. The capital of", add_special=False))
    finally:
        s.close()
    assert identical
    assert gap < 0.5  # against logits spanning tens of units: batch-split numerics, not a wrong state


@pytest.mark.parametrize("spec", [PLAIN, LOOKUP, DRAFT], ids=lambda s: s.label())
def test_switching_conversations_restores_and_matches_a_fresh_session(tiny: TinyModel, spec: SpecSettings) -> None:
    """Two chats interleaved (A, B, A continued): A resumes from its saved state, on the target and (with a draft
    model, here the target itself) the draft context, and the output equals a fresh session's."""
    warm = _tiny_session(tiny, draft=str(tiny.path))
    try:
        a1 = _run(warm, _raw(TINY_A, speculative=spec))
        _run(warm, _raw(TINY_B, speculative=spec))
        a2_prompt = TINY_A + " yes no"
        a2 = _run(warm, _raw(a2_prompt, speculative=spec))
        owners = {e.owner for e in warm.cache.store.entries}
        stats = warm.cache.snapshot()
    finally:
        warm.close()
    assert a2.timings.cache_n == a1.prompt_tokens  # the end-of-prompt checkpoint of A
    assert a2.timings.prompt_n == a2.prompt_tokens - a1.prompt_tokens
    assert stats["restores"] >= 1 and stats["hits"] >= 1 and stats["misses"] == 2
    if spec is DRAFT:
        assert owners == {"target", "draft"} and a2.timings.draft_n > 0
    _assert_matches_a_fresh_session(_tiny_session(tiny), _raw(a2_prompt), a2)


def _assert_matches_a_fresh_session(fresh: Session, req: GenerationRequest, got: GenerationSummary) -> None:
    """`got` equals plain greedy decoding of `req` in `fresh` (closed here), except at the fresh run's near-ties."""
    try:
        ref = _run(fresh, replace(req, speculative=PLAIN, collect_margins=True))
    finally:
        fresh.close()
    assert ref.timings.cache_n == 0
    verdict = compare(ref.tokens, ref.margins, got.tokens)
    assert verdict.acceptable, verdict.describe()


def _chat_req(messages: list[dict[str, str]], **kw) -> GenerationRequest:
    kw.setdefault("max_tokens", 8)
    kw.setdefault("sampling", GREEDY)
    return GenerationRequest(messages=tuple(messages), **kw)


@pytest.fixture(scope="module")
def smol_pair(smollm2_path: Path, smollm2_q2k_path: Path) -> Iterator[Session]:
    # One thread: on a small shared machine spinning llama.cpp threads oversubscribe the cores (see tests/server).
    cfg = EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=1024, n_batch=128, n_threads=1)
    s = Session(cfg)
    yield s
    s.close()


@pytest.mark.parametrize("spec", [PLAIN, SpecSettings(source="draft", n_max=4)], ids=lambda s: s.label())
def test_attention_chat_switch_restores_kv_and_matches_a_fresh_session(
    smol_pair: Session, smollm2_path: Path, spec: SpecSettings
) -> None:
    """SmolLM2 with its Q2_K draft: chat A, chat B, then A's second turn restores A's KV (target and draft)."""
    s = smol_pair
    a_msgs = [{"role": "user", "content": "Name three colours."}]
    a1 = _run(s, _chat_req(a_msgs, speculative=spec))
    _run(s, _chat_req([{"role": "user", "content": "Write a haiku about rain on a tin roof."}], speculative=spec))
    follow = a_msgs + [
        {"role": "assistant", "content": a1.text},
        {"role": "user", "content": "And three animals?"},
    ]
    a2 = _run(s, _chat_req(follow, speculative=spec))
    assert a2.timings.cache_n >= a1.prompt_tokens  # A's prompt (and the reply, where it re-tokenizes alike)
    fresh = Session(EngineConfig(model=str(smollm2_path), n_ctx=1024, n_batch=128, n_threads=1))
    _assert_matches_a_fresh_session(fresh, _chat_req(follow), a2)


def test_cache_off_still_exact_and_saves_nothing(tiny: TinyModel) -> None:
    s = _tiny_session(tiny, cache_ram_mib=0)
    try:
        _run(s, _raw(TINY_A))
        _run(s, _raw(TINY_B))
        again = _run(s, _raw(TINY_A + " yes no"))
        assert s.cache.store.entries == [] and again.timings.cache_n == 0
    finally:
        s.close()


def test_persisted_cache_starts_warm_and_foreign_files_are_ignored(tiny: TinyModel, tmp_path: Path) -> None:
    folder = tmp_path / "prompt-cache"
    s = _tiny_session(tiny, cache_dir=str(folder))
    try:
        first = _run(s, _raw(TINY_A))
    finally:
        s.close()  # persists the live state and the checkpoints
    assert list(folder.glob("*/index.json"))
    follow = _raw(TINY_A + " yes no")
    reopened = _tiny_session(tiny, cache_dir=str(folder))
    try:
        warm = _run(reopened, follow)
    finally:
        reopened.close()
    assert warm.timings.cache_n >= first.prompt_tokens
    # Another context size (the same would hold for another model or build) never reads those states.
    other = Session(EngineConfig(model=str(tiny.path), n_ctx=256, n_batch=64, n_threads=1, cache_dir=str(folder)))
    try:
        assert other.cache.store.entries == []
        assert _run(other, follow).timings.cache_n == 0
    finally:
        other.close()
    # A damaged state file is never handed to llama.cpp (checksums); the request is answered from a full prefill.
    for state in folder.glob("*/state-*.bin"):
        state.write_bytes(b"\0" * state.stat().st_size)
    damaged = _tiny_session(tiny, cache_dir=str(folder))
    try:
        out = _run(damaged, follow)
        fresh = _run(damaged, _raw(TINY_A + " yes no", cache_prompt=False, collect_margins=True))
    finally:
        damaged.close()
    assert out.timings.cache_n == 0
    verdict = compare(fresh.tokens, fresh.margins, out.tokens)
    assert verdict.acceptable, verdict.describe()
