"""Constants and request builders shared by the server tests."""

from __future__ import annotations

MODEL_ID = "smollm2"
MAX_QUEUE = 4  # small, so the concurrency test sees some 429s
MAX_BODY = 256 * 1024  # small, so the oversized-body cases stay quick


def chat_body(content: str = "Say hello.", max_tokens: int = 8, **extra: object) -> dict[str, object]:
    """A valid greedy chat request; tests override single fields to make it malformed."""
    body: dict[str, object] = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    body.update(extra)
    return body
