"""The conversation cache through `dynadraft serve --cache-ram` and the openai client: cached tokens and /metrics."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.server.helpers import dynadraft_serve


@pytest.fixture(scope="module")
def served(smollm2_path: Path) -> Iterator[str]:
    with dynadraft_serve("--model", str(smollm2_path), "--model-id", "m", "--cache-ram", "64") as (_, _, base):
        yield base.removesuffix("/v1")


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", text, re.M)
    assert match, name
    return float(match.group(1))


def test_second_turn_and_switched_chat_report_cached_tokens(served: str) -> None:
    client = openai.OpenAI(base_url=f"{served}/v1", api_key="x", max_retries=0, timeout=120)
    a = [{"role": "user", "content": "Name three colours."}]
    b = [{"role": "user", "content": "Write a haiku about rain on a tin roof, please."}]

    def chat(messages: list[dict[str, str]]) -> openai.types.chat.ChatCompletion:
        return client.chat.completions.create(model="m", messages=messages, max_tokens=8, temperature=0)  # type: ignore[arg-type]

    first = chat(a)
    assert first.usage is not None and first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    chat(b)  # another client's chat takes the context over; A's state is saved in RAM
    a2 = [*a, {"role": "assistant", "content": first.choices[0].message.content or ""}]
    a2.append({"role": "user", "content": "And three animals?"})
    second = chat(a2)
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached >= first.usage.prompt_tokens  # restored, not re-prefilled
    timings = (second.model_extra or {})["timings"]
    assert timings["cache_n"] == cached and timings["prompt_n"] == second.usage.prompt_tokens - cached
    client.close()
    metrics = httpx.get(f"{served}/metrics", timeout=30).text
    assert _metric(metrics, "dynadraft_prompt_cache_budget_bytes") == 64 * 1024 * 1024  # --cache-ram reached it
    # Chat B shares the template's system prompt with A, so only the very first request missed.
    assert _metric(metrics, "dynadraft_prompt_cache_misses_total") == 1
    assert _metric(metrics, "dynadraft_prompt_cache_hits_total") == 2
    assert _metric(metrics, "dynadraft_prompt_cache_restores_total") >= 1
    assert _metric(metrics, "dynadraft_prompt_cache_evictions_total") == 0
    assert 0 < _metric(metrics, "dynadraft_prompt_cache_bytes") <= 64 * 1024 * 1024
