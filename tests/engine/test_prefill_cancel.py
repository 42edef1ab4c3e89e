"""Cancel during a long prompt: prefill stops between n_batch chunks and leaves a KV prefix later requests reuse."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary

N_BATCH = 16
LONG = "Count with me: " + ", ".join(str(i) for i in range(90))  # ~270 tokens: ~17 chunks of 16


class _CancelAfter(threading.Event):
    """An Event that becomes set on its `n`-th check, so the cancel lands at a known chunk boundary."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.checks = 0

    def is_set(self) -> bool:
        self.checks += 1
        if self.checks >= self.n:
            self.set()
        return super().is_set()


@pytest.fixture(scope="module")
def session(smollm2_path: Path) -> Iterator[Session]:
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=2048, n_batch=N_BATCH, n_threads=1))
    yield s
    s.close()


def _run(session: Session, req: GenerationRequest, cancel: threading.Event | None = None) -> GenerationSummary:
    return next(ev.summary for ev in session.generate(req, cancel) if isinstance(ev, DoneEvent))


def test_cancel_stops_prefill_between_chunks(session: Session) -> None:
    req = GenerationRequest(prompt=LONG, max_tokens=4)
    prompt = session.format_prompt(req)
    assert len(prompt) > 10 * N_BATCH
    session.ctx.clear()
    cancel = _CancelAfter(4)  # set when asked before the 4th chunk
    out = _run(session, req, cancel)
    assert out.finish_reason == "cancelled" and out.tokens == () and out.text == ""
    # Exactly three chunks were decoded, and the KV cache holds exactly those prompt tokens.
    assert out.timings.prompt_n == 3 * N_BATCH
    assert session.ctx.tokens == prompt[: 3 * N_BATCH]
    # A later request reuses that prefix and finishes the prompt.
    again = _run(session, req)
    assert again.timings.cache_n == 3 * N_BATCH
    assert again.timings.prompt_n == len(prompt) - 3 * N_BATCH
    assert again.finish_reason == "length" and len(again.tokens) == 4
    session.ctx.clear()
    fresh = _run(session, req)
    assert fresh.tokens == again.tokens  # the reused prefix gave the same greedy tokens as a full prefill


def test_cancel_before_prompt_decodes_nothing(session: Session) -> None:
    session.ctx.clear()
    cancel = threading.Event()
    cancel.set()
    out = _run(session, GenerationRequest(prompt=LONG, max_tokens=4), cancel)
    assert out.finish_reason == "cancelled" and out.timings.prompt_n == 0 and session.ctx.tokens == []
