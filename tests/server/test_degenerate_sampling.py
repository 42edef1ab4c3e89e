"""Over HTTP: a temperature of 1e-40 answers greedily (no NaN garbage), a repeat_penalty of 1e-40 is a 400."""

from __future__ import annotations

import httpx


def test_http_tiny_temperature_and_absurd_penalty(base_url: str) -> None:
    body = {"model": "smollm2", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 6}
    greedy = httpx.post(f"{base_url}/v1/chat/completions", json={**body, "temperature": 0}, timeout=60).json()
    tiny = httpx.post(f"{base_url}/v1/chat/completions", json={**body, "temperature": 1e-40, "seed": 1}, timeout=60)
    assert tiny.status_code == 200
    assert tiny.json()["choices"][0]["message"]["content"] == greedy["choices"][0]["message"]["content"]
    bad = httpx.post(f"{base_url}/v1/chat/completions", json={**body, "repeat_penalty": 1e-40}, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "repeat_penalty"
