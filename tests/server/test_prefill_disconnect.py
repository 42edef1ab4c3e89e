"""A client that disconnects during a long prompt frees the engine between prompt chunks, not after the prompt."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.engine.config import EngineConfig
from app.engine.worker import Engine
from app.server.runner import EndpointServer

N_BATCH = 16
LONG = "Count with me: " + ", ".join(str(i) for i in range(120))  # ~360 tokens: ~22 chunks of 16


@pytest.fixture(scope="module")
def url(smollm2_path: Path) -> Iterator[str]:
    config = EngineConfig(model=str(smollm2_path), n_ctx=1024, n_batch=N_BATCH, n_threads=1)
    with Engine(config, max_queue=4) as engine, EndpointServer(engine, "m", port=0) as srv:
        yield srv.url


def _wait_idle(url: str) -> None:
    for _ in range(600):
        if httpx.get(f"{url}/health").json()["queue_depth"] == 0:
            return
        time.sleep(0.05)
    raise AssertionError("engine never went idle")


def test_disconnect_during_prefill_leaves_reusable_prefix(url: str) -> None:
    body = {"model": "m", "prompt": LONG, "max_tokens": 1, "temperature": 0}
    _wait_idle(url)
    full = httpx.post(f"{url}/v1/completions", json={**body, "cache_prompt": False}, timeout=300).json()
    n_prompt = full["usage"]["prompt_tokens"]
    assert n_prompt > 10 * N_BATCH
    # Drop the connection about a quarter into the prompt, whatever this machine's speed.
    drop_after = max(0.05, full["timings"]["prompt_ms"] / 4000)
    # Shift the cached prefix away so the next request prefills (almost) all of LONG again.
    httpx.post(f"{url}/v1/completions", json={**body, "prompt": "Hello"}, timeout=60).raise_for_status()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{url}/v1/completions", json=body, timeout=httpx.Timeout(60, read=drop_after))
    _wait_idle(url)
    again = httpx.post(f"{url}/v1/completions", json=body, timeout=300).json()
    cache_n = again["timings"]["cache_n"]
    # The cancelled request stopped well before the end of the prompt (without the fix it prefilled all of it:
    # cache_n == n_prompt - 1); the prefix it left is reused and gives the same token.
    assert cache_n <= n_prompt - 2 * N_BATCH, (cache_n, n_prompt)
    assert again["choices"][0]["text"] == full["choices"][0]["text"]
