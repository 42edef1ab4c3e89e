"""The speculative engine on real models: exactness, sampling law, rollback, prefix cache, limits and cancel."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import ContextLengthExceeded, DoneEvent, GenerationRequest, GenerationSummary, TextEvent
from app.engine.worker import Engine
from app.runtime.sampling import SamplingParams, distribution
from app.speculative.exactness import compare
from app.speculative.settings import PLAIN, SpecSettings
from app.speculative.verify import Verdict
from tests.engine.lawcheck import first_token_tv, next_token_logits

GREEDY = SamplingParams(temperature=0.0)
CODE = """def parse_csv(text):
    rows = []
    for line in text.splitlines():
        fields = line.split(",")
        rows.append([f.strip() for f in fields])
    return rows
"""
# A copy-heavy request: most of the answer repeats the prompt, which is what prompt lookup is for.
COPY_PROMPT = "Copy this Python function exactly, renaming the variable rows to records:\n\n" + CODE


def _chat(text: str, **kw) -> GenerationRequest:
    kw.setdefault("max_tokens", 48)
    kw.setdefault("sampling", GREEDY)
    return GenerationRequest(messages=({"role": "user", "content": text},), **kw)


def _run(session: Session, req: GenerationRequest, cancel: threading.Event | None = None) -> GenerationSummary:
    done = [ev for ev in session.generate(req, cancel) if isinstance(ev, DoneEvent)]
    return done[0].summary


@pytest.mark.parametrize(
    "spec",
    [
        SpecSettings(source="lookup", n_max=4),
        SpecSettings(source="lookup", n_max=8, n_min=2),
        SpecSettings(source="draft", n_max=2),
        SpecSettings(source="draft", n_max=4, p_min=0.5),
        SpecSettings(source="draft", n_max=8),
    ],
    ids=lambda s: s.label(),
)
@pytest.mark.parametrize("prompt", [COPY_PROMPT, "Explain in two sentences why the sky is blue."], ids=["copy", "chat"])
def test_greedy_speculation_matches_plain_decoding(small_session: Session, spec: SpecSettings, prompt: str) -> None:
    plain = _run(small_session, _chat(prompt, speculative=PLAIN, collect_margins=True))
    spec_run = _run(small_session, _chat(prompt, speculative=spec))
    verdict = compare(plain.tokens, plain.margins, spec_run.tokens)
    assert verdict.acceptable, verdict.describe()
    assert spec_run.timings.draft_n > 0
    if prompt is COPY_PROMPT and spec.source == "lookup":
        assert spec_run.timings.draft_n_accepted > 0
        assert spec_run.steps < len(spec_run.tokens)  # fewer target verifies than tokens: speculation paid


def test_first_divergence_is_judged_at_a_near_tie_only(small_session: Session) -> None:
    # The criterion itself must bite: a run that "diverges" at an ordinary margin is refused.
    plain = _run(small_session, _chat("Name three colours.", speculative=PLAIN, collect_margins=True))
    i = int(np.argmax(plain.margins[:10]))  # a confident position
    corrupted = list(plain.tokens)
    corrupted[i] = (corrupted[i] + 1) % 49152
    assert not compare(plain.tokens, plain.margins, corrupted).acceptable


def test_sampling_law_is_preserved_with_real_distributions(small_session: Session) -> None:
    """At a fixed prefix, the first emitted token through the verifier follows the target's own p (real logits)."""
    s = small_session
    params = SamplingParams(temperature=1.0, top_k=8)
    target, draft = next_token_logits(s, s.format_prompt(_chat("Tell me a word:")))
    p, q = distribution(target, params), distribution(draft, params)
    assert 0.5 * np.abs(p - q).sum() > 0.05  # the draft really differs from the target
    tv = first_token_tv(p, q, 20_000, seed=7)
    assert tv < 0.02, tv  # 8 outcomes, 20k draws: noise TV ~ 0.006
    # An accept-everything verifier's output follows q: the same check catches it.
    assert first_token_tv(p, q, 20_000, seed=8, accept_all=True) > 0.02
    s.ctx.clear()


def test_seeded_sampling_is_reproducible_with_speculation(small_session: Session) -> None:
    # Same seed and same cache state -> same tokens. (A different cache state changes batch shapes, and llama.cpp's
    # logits move slightly with batch size, so a draw near a boundary may flip — as in llama.cpp's own server.)
    req = _chat(
        "Write a short poem about rain.",
        max_tokens=24,
        sampling=SamplingParams(temperature=0.8, seed=42),
        speculative=SpecSettings(source="draft", n_max=4),
    )
    _run(small_session, req)
    a, b = _run(small_session, req), _run(small_session, req)
    assert a.tokens == b.tokens and len(a.tokens) > 0
    c = _run(
        small_session,
        _chat(
            "Write a short poem about rain.",
            max_tokens=24,
            sampling=SamplingParams(temperature=0.8, seed=43),
            speculative=SpecSettings(source="draft", n_max=4),
        ),
    )
    assert c.tokens != a.tokens


def test_rollback_leaves_both_caches_consistent(smollm2_path: Path, smollm2_q2k_path: Path) -> None:
    """After speculative turns with rejections, a follow-up turn equals the same turn in a fresh session.

    The warm session prefills only the new suffix (cache_n > 0) while the fresh one prefills everything, and
    llama.cpp's logits depend on how a prompt was split into batches: with flash attention on (the default, as in
    llama.cpp) this moved a 0.07-0.13 top-2 margin enough to flip a token. So the two must agree except at a
    near-tie of the fresh run; a stale or missing KV entry after rollback diverges at an ordinary margin."""
    cfg = EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=2048, n_batch=256)
    spec = SpecSettings(source="draft", n_max=6)
    first = _chat("List five animals.", speculative=spec)
    warm = Session(cfg)
    try:
        s1 = _run(warm, first)
        assert s1.timings.draft_n > s1.timings.draft_n_accepted  # there were rejections to roll back
        follow = GenerationRequest(
            messages=(
                {"role": "user", "content": "List five animals."},
                {"role": "assistant", "content": s1.text},
                {"role": "user", "content": "Now list five plants."},
            ),
            max_tokens=32,
            sampling=GREEDY,
            speculative=spec,
            collect_margins=True,
        )
        s2 = _run(warm, follow)
        assert s2.timings.cache_n > 0
    finally:
        warm.close()
    fresh = Session(cfg)
    try:
        s3 = _run(fresh, follow)
    finally:
        fresh.close()
    verdict = compare(s3.tokens, s3.margins, s2.tokens)
    assert verdict.acceptable, verdict.describe()


def test_prefix_cache_reuses_the_common_prefix_and_gives_the_same_output(small_session: Session) -> None:
    req = replace(
        _chat("What is the boiling point of water at sea level?", speculative=PLAIN, max_tokens=16),
        collect_margins=True,
    )
    _run(small_session, _chat("Something unrelated first.", max_tokens=2, speculative=PLAIN))
    a = _run(small_session, req)
    b = _run(small_session, req)
    assert b.timings.cache_n == b.prompt_tokens - 1
    assert b.timings.prompt_n == 1
    # The same tokens, except at a near-tie: the two prefills were split differently (see the rollback test).
    verdict = compare(a.tokens, a.margins, b.tokens)
    assert verdict.acceptable, verdict.describe()


def test_prompt_longer_than_n_batch(smollm2_path: Path) -> None:
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=2048, n_batch=32))
    try:
        out = _run(s, _chat(COPY_PROMPT * 3, max_tokens=8, speculative=SpecSettings(source="lookup", n_max=16)))
        assert out.prompt_tokens > 3 * 32 and out.timings.predicted_n == 8
    finally:
        s.close()


def test_prompt_beyond_n_ctx_is_a_clear_error_and_the_session_lives_on(smollm2_path: Path) -> None:
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=128, n_batch=64))
    try:
        with pytest.raises(ContextLengthExceeded, match=f"exceeds the context window of {s.ctx.n_ctx} tokens"):
            _run(s, _chat("word " * 400))
        with pytest.raises(ContextLengthExceeded):
            _run(s, _chat("hi", max_tokens=1000))
        assert _run(s, _chat("hi", max_tokens=4)).timings.predicted_n >= 1
    finally:
        s.close()


def test_cancel_mid_generation_through_the_engine_thread(smollm2_path: Path) -> None:
    with Engine(EngineConfig(model=str(smollm2_path), n_ctx=1024)) as engine:
        handle = engine.submit(_chat("Count from one to one hundred in words.", max_tokens=400, speculative=PLAIN))
        for ev in handle.events(timeout=60):
            if isinstance(ev, TextEvent):
                handle.cancel()
        assert handle.summary is not None
        assert handle.summary.finish_reason == "cancelled"
        assert handle.summary.timings.predicted_n < 400
        after = engine.generate(_chat("hi", max_tokens=3))  # the engine takes the next request
        assert after.timings.predicted_n >= 1


def test_multibyte_characters_are_never_split(small_session: Session) -> None:
    out = _run(small_session, _chat("Write the word 'café' and a smiley emoji 😀 three times.", max_tokens=40))
    pieces: list[str] = []
    for ev in small_session.generate(_chat("Write the word 'café' and a smiley emoji 😀 three times.", max_tokens=40)):
        if isinstance(ev, TextEvent):
            pieces.append(ev.text)
    streamed = "".join(pieces)
    assert "\ufffd" not in streamed
    assert streamed == out.text
    # The ids decode to the same text; a character cut off by max_tokens is dropped, never shown half.
    raw = b"".join(small_session.model.vocab.piece(t) for t in out.tokens)
    assert streamed == raw.decode("utf-8", "ignore")


def test_stop_strings_and_finish_reasons(small_session: Session) -> None:
    full = _run(small_session, _chat(COPY_PROMPT, max_tokens=40, speculative=PLAIN))
    word = "strip"
    assert word in full.text
    stopped = _run(
        small_session, _chat(COPY_PROMPT, max_tokens=40, stop=(word,), speculative=SpecSettings("lookup", 8))
    )
    assert stopped.finish_reason == "stop"
    assert stopped.text == full.text[: full.text.index(word)]
    assert _run(small_session, _chat(COPY_PROMPT, max_tokens=5)).finish_reason == "length"


def test_speculation_never_overshoots_max_tokens(small_session: Session) -> None:
    for n in (1, 2, 3, 7):
        out = _run(small_session, _chat(COPY_PROMPT, max_tokens=n, speculative=SpecSettings(source="lookup", n_max=8)))
        assert len(out.tokens) == n


def test_verdict_type() -> None:
    assert Verdict(1, 2).n_accepted == 1


def test_a_model_that_fails_to_load_is_reported_and_never_hangs(tmp_path: Path) -> None:
    from app.engine.types import EngineError

    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    engine = Engine(EngineConfig(model=str(bad)))
    with pytest.raises(EngineError, match="could not load"):
        engine.wait_ready(60)
    with pytest.raises(EngineError, match="failed to load"):
        engine.submit(_chat("hi"))
    engine.close()


def test_cache_prompt_false_prefills_everything(small_session: Session) -> None:
    req = _chat("What is the boiling point of water at sea level?", speculative=PLAIN, max_tokens=8)
    _run(small_session, req)
    again = _run(small_session, GenerationRequest(**{**req.__dict__, "cache_prompt": False}))
    assert again.timings.cache_n == 0 and again.timings.prompt_n == again.prompt_tokens
