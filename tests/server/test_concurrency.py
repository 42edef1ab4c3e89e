"""Many streaming clients at once (FIFO queue, 429 when full, no mixing) and clients that drop mid-request."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from app.engine.worker import Engine
from app.server.runner import EndpointServer
from tests.server.helpers import MAX_QUEUE, MODEL_ID, chat_body

TOPICS = [
    "Apples", "Bridges", "Clouds", "Dolphins", "Engines", "Forests", "Glaciers", "Harbors",
    "Islands", "Jazz", "Kites", "Lanterns", "Mountains", "Nebulas", "Oceans", "Pianos",
]  # fmt: skip


def _stream_chat(base_url: str, prompt: str) -> tuple[int, Any]:
    """One streaming chat; (200, text) or (status, error body)."""
    body = chat_body(f"{prompt}: describe them in one sentence.", 16, stream=True)
    # Without the prefix cache the same request always prefills the same way, so greedy output cannot depend on what
    # the engine served before it (llama.cpp's batch-split numerics); any difference left would be real mixing.
    body["cache_prompt"] = False
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=120) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, {"body": r.json(), "retry_after": r.headers.get("retry-after")}
        pieces: list[str] = []
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            assert "error" not in chunk, chunk
            for choice in chunk["choices"]:
                pieces.append(choice["delta"].get("content") or "")
        return 200, "".join(pieces)


def test_sixteen_concurrent_streams(base_url: str, engine: Engine) -> None:
    expected = {}
    for topic in TOPICS:
        status, text = _stream_chat(base_url, topic)
        assert status == 200
        expected[topic] = text
    assert len(set(expected.values())) > 1  # the prompts really differ, so mixing would show

    results: dict[str, tuple[int, Any]] = {}
    barrier = threading.Barrier(len(TOPICS))

    def client(topic: str) -> None:
        barrier.wait()
        results[topic] = _stream_chat(base_url, topic)

    threads = [threading.Thread(target=client, args=(t,)) for t in TOPICS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert len(results) == len(TOPICS)
    done = [t for t, (status, _) in results.items() if status == 200]
    refused = [t for t, (status, _) in results.items() if status == 429]
    assert len(done) + len(refused) == len(TOPICS), results
    assert len(done) >= 1
    assert refused, f"with max_queue={MAX_QUEUE}, 16 simultaneous clients should see some 429s"
    for topic in done:
        assert results[topic][1] == expected[topic], topic
    for topic in refused:
        info = results[topic][1]
        assert info["body"]["error"]["code"] == "queue_full"
        assert info["body"]["error"]["type"] == "rate_limit_error"
        assert int(info["retry_after"]) >= 1
    _wait_idle(engine)


def _wait_idle(engine: Engine, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while engine.queue_depth and time.monotonic() < deadline:
        time.sleep(0.02)
    assert engine.queue_depth == 0


def _wait_cancelled(server: EndpointServer, before: int, timeout: float = 10.0) -> float:
    t0 = time.monotonic()
    while server.metrics.generations["cancelled"] <= before:
        assert time.monotonic() - t0 < timeout, "the dropped request was not cancelled"
        time.sleep(0.005)
    return time.monotonic() - t0


COUNTING = {"model": MODEL_ID, "prompt": "1, 2, 3, 4, 5, 6, 7,", "max_tokens": 1500, "temperature": 0}


def test_stream_drop_cancels_generation(base_url: str, server: EndpointServer, engine: Engine) -> None:
    _wait_idle(engine)
    before = server.metrics.generations["cancelled"]
    tokens_before = server.metrics.completion_tokens
    with (
        httpx.Client(base_url=base_url, timeout=60) as c,
        c.stream("POST", "/v1/completions", json={**COUNTING, "stream": True}) as r,
    ):
        assert r.status_code == 200
        seen = 0
        for line in r.iter_lines():
            seen += line.startswith("data: ")
            if seen >= 5:
                break
    # Leaving the block closed the connection mid-stream.
    waited = _wait_cancelled(server, before)
    assert waited < 2.0, f"cancellation took {waited:.2f}s"
    assert server.metrics.completion_tokens - tokens_before < 1500  # it stopped early, not at max_tokens
    t0 = time.monotonic()
    r2 = httpx.post(f"{base_url}/v1/chat/completions", json=chat_body("Hi", 4), timeout=30)
    assert r2.status_code == 200
    assert time.monotonic() - t0 < 5.0  # the engine took the next request promptly
    _wait_idle(engine)


def test_non_streaming_drop_cancels_generation(base_url: str, server: EndpointServer, engine: Engine) -> None:
    _wait_idle(engine)
    before = server.metrics.generations["cancelled"]
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{base_url}/v1/completions", json=COUNTING, timeout=httpx.Timeout(60, read=0.5))
    waited = _wait_cancelled(server, before)
    assert waited < 2.0, f"cancellation took {waited:.2f}s"
    _wait_idle(engine)
    r2 = httpx.post(f"{base_url}/v1/chat/completions", json=chat_body("Hi", 4), timeout=30)
    assert r2.status_code == 200
