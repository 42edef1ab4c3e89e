"""The context window as llama.cpp users expect it: --ctx-size 0 is the model's training context, a larger one is
capped there (as llama-server does), llama.cpp's rounding up to a multiple of 256 is said, and all of it reaches the
user: the command line's stderr, a Session's notes, and the window requests are checked against."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.profile import DEFAULT_CTX, allocation_note, context_window, resolve_profile
from app.engine.session import Session
from app.engine.types import ContextLengthExceeded, GenerationRequest
from app.runtime.llama import Model
from app.runtime.sampling import SamplingParams
from tests.journeys.helpers import THREADS, dynadraft, generate_json


def test_the_window_follows_llama_cpps_conventions() -> None:
    assert context_window(0, 8192) == (8192, "context window 8192 tokens: the model's training context (--ctx-size 0)")
    assert context_window(0, 0) == (
        DEFAULT_CTX,
        f"context window {DEFAULT_CTX} tokens: the model does not say its training context",
    )
    window, note = context_window(20_000, 8192)
    assert (window, note) == (
        8192,
        "context capped to 8192 tokens, the model's training context (20000 asked)",
    )
    assert context_window(4096, 8192) == (4096, None)
    assert context_window(20_000, 0) == (20_000, None)  # a model that does not say is not capped
    assert allocation_note(96, 256) == "context window 256 tokens: llama.cpp rounds 96 up to a multiple of 256"
    assert allocation_note(512, 512) is None


def test_zero_is_a_context_size_and_too_small_is_refused_with_what_is_allowed() -> None:
    assert resolve_profile(ctx_size=0).n_ctx == 0
    assert resolve_profile().n_ctx == DEFAULT_CTX
    with pytest.raises(ValueError, match=r"context size must be >= 16 \(or 0: the model's training context\)"):
        resolve_profile(ctx_size=8)


@pytest.fixture(scope="module")
def n_ctx_train(smollm2_path: Path) -> int:
    m = Model(smollm2_path)
    try:
        return m.n_ctx_train
    finally:
        m.close()


def _session(path: Path, n_ctx: int) -> Session:
    return Session(EngineConfig(model=str(path), n_ctx=n_ctx, n_threads=1, source_memory=False))


def test_a_session_runs_the_window_it_says(smollm2_path: Path, n_ctx_train: int) -> None:
    assert n_ctx_train > 1024  # SmolLM2 declares its training context
    s = _session(smollm2_path, 0)
    try:
        assert s.n_ctx == n_ctx_train and s.model_meta().n_ctx_train == n_ctx_train
        assert s.context_notes == (f"context window {n_ctx_train} tokens: the model's training context (--ctx-size 0)",)
    finally:
        s.close()
    s = _session(smollm2_path, 2 * n_ctx_train)
    try:
        assert s.n_ctx == n_ctx_train and "capped" in s.context_notes[0]
        # requests are checked against the window that was allocated, not the one asked for
        req = GenerationRequest(prompt="Hi", max_tokens=n_ctx_train, sampling=SamplingParams(temperature=0.0))
        with pytest.raises(ContextLengthExceeded, match=f"context window of {n_ctx_train} tokens"):
            list(s.generate(req))
    finally:
        s.close()
    s = _session(smollm2_path, 96)
    try:
        assert s.n_ctx == 256 and s.model_meta().notes == (allocation_note(96, 256),)
    finally:
        s.close()


def test_the_command_line_says_what_window_it_runs(smollm2_path: Path, n_ctx_train: int) -> None:
    args = ("--model", str(smollm2_path), *THREADS, "--prompt", "Hi", "--max-tokens", "2", "--temperature", "0")
    _, err = generate_json(*args, "--ctx-size", "96")
    assert "dynadraft generate: context window 256 tokens: llama.cpp rounds 96 up to a multiple of 256" in err
    _, err = generate_json(*args, "--ctx-size", "0")
    assert f"dynadraft generate: context window {n_ctx_train} tokens: the model's training context" in err
    _, err = generate_json(*args)  # the default window fits: nothing to say
    assert "context window" not in err
    p = dynadraft("generate", *args, "--ctx-size", "8")
    assert p.returncode == 2 and "context size must be >= 16 (or 0: the model's training context)" in p.stderr
