"""Multi-turn chat with MTP through `dynadraft serve` and the openai client: the turn whose prefix comes back from the
conversation cache still drafts with the model's own head."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.helpers import dynadraft_serve
from tests.speculative.test_mtp import TINY, _write_pair

MTP = {"speculative": {"source": "mtp", "n_max": 3}}


@pytest.fixture(scope="module")
def tiny_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_pair(tmp_path_factory.mktemp("tiny-mtp-serve"), **TINY).mtp


def test_second_chat_turn_restored_from_the_cache_drafts_with_mtp(tiny_mtp: Path) -> None:
    a = [{"role": "user", "content": "hello world the cat sat on the mat"}]
    b = [{"role": "user", "content": "copy paste data list one two three four five"}]
    with dynadraft_serve("--model", str(tiny_mtp), "--cache-ram", "64") as (client, model, _):

        def chat(messages: list[dict[str, str]], **body: object) -> dict:  # type: ignore[type-arg]
            out = client.chat.completions.create(
                model=model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=16,
                temperature=0,
                extra_body=body,
            )
            return {"text": out.choices[0].message.content or "", "usage": out.usage, **(out.model_extra or {})}

        first = chat(a, **MTP)
        chat(b, **MTP)  # another chat takes the context over: A's state goes to the cache, with its MTP part
        a2 = [*a, {"role": "assistant", "content": first["text"]}, {"role": "user", "content": "and the dog ran"}]
        second = chat(a2, **MTP)
        assert second["usage"].prompt_tokens_details.cached_tokens >= first["usage"].prompt_tokens  # restored
        assert second["dynamic_draft"]["selected"]["source"] == "mtp"
        assert second["timings"]["draft_n"] > 0  # before the fix: 0 on every restored turn
        plain = chat(a2, speculative={"source": "none"}, cache_prompt=False)
        assert second["text"] == plain["text"]
