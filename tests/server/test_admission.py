"""Admission does not depend on max_tokens: a request without one gets its 429 while the queue is still full."""

from __future__ import annotations

import contextlib

import httpx

from app.engine.types import EngineError, GenerationRequest
from app.engine.worker import Engine
from tests.server.helpers import MAX_QUEUE, MODEL_ID


def _long(prompt: str) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_tokens=1500)


def test_request_without_max_tokens_is_refused_while_queue_full(base_url: str, engine: Engine) -> None:
    running = engine.submit(_long("1, 2, 3, 4, 5,"))
    handles = [running]
    try:
        next(running.events(timeout=60))  # its first event: the engine thread is busy with it now
        handles += [engine.submit(_long(f"{i}, {i + 1},")) for i in range(MAX_QUEUE)]  # the queue is full
        for body in (
            {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "temperature": 0},
            {"model": MODEL_ID, "prompt": "Hello", "temperature": 0},
        ):
            path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            r = httpx.post(f"{base_url}{path}", json=body, timeout=120)
            assert r.status_code == 429, r.text
            assert r.json()["error"]["code"] == "queue_full" and r.headers["retry-after"]
            # Before the fix the prompt was measured on the engine thread first: the 429 came only after the
            # running generation (1500 tokens) and the queued ones had ended.
            assert running.summary is None and not running.cancelled.is_set()
    finally:
        for h in handles:
            h.cancel()
        for h in handles:
            with contextlib.suppress(EngineError):  # the queued ones end "cancelled before it started"
                h.result(timeout=120)


def test_without_max_tokens_prompt_filling_the_window_is_400(base_url: str, engine: Engine) -> None:
    prompt = "one two three four five six seven eight " * 300  # well over the 2048-token window
    r = httpx.post(f"{base_url}/v1/completions", json={"model": MODEL_ID, "prompt": prompt}, timeout=120)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "context_length_exceeded" and "fills the context window of" in err["message"]


def test_without_max_tokens_runs_to_the_end(base_url: str) -> None:
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Say hi."}], "temperature": 0}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] in ("stop", "length")
