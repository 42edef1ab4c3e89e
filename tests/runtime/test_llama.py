"""A real model through llama-cpp-python: greedy tokens, deterministic across two runs."""

from __future__ import annotations

from pathlib import Path

from app.runtime.llama import Context, ContextParams, Model
from app.runtime.sampling import greedy_token


def _greedy(model: Model, prompt: str, n: int) -> list[int]:
    ctx = Context(model, ContextParams(n_ctx=256, n_batch=64))
    try:
        ctx.prefill(model.vocab.tokenize(prompt, add_special=True))
        out: list[int] = []
        for _ in range(n):
            tok = greedy_token(ctx.logits(-1))
            out.append(tok)
            ctx.decode([tok])
        return out
    finally:
        ctx.close()


def test_smollm2_generates_real_deterministic_tokens(smollm2_path: Path) -> None:
    model = Model(smollm2_path)
    try:
        a = _greedy(model, "The capital of France is", 8)
        b = _greedy(model, "The capital of France is", 8)
        assert a == b
        text = model.vocab.detokenize(a)
        assert "Paris" in text, text
        assert model.vocab.n_vocab == 49152
    finally:
        model.close()
