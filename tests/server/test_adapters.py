"""The pure wire -> engine conversions of the OpenAI dialects (no server, no model)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from app.server import openai_chat, openai_common, openai_completions
from app.server.errors import ApiError, from_validation_error
from app.server.schemas import ChatCompletionRequest, CompletionRequest
from app.speculative.mtp import MtpSource
from app.speculative.settings import DEFAULT_N_MAX, SpecSettings


def chat(**fields: Any) -> ChatCompletionRequest:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    body.update(fields)
    return ChatCompletionRequest.model_validate_json(json.dumps(body))


def test_defaults() -> None:
    req = openai_chat.chat_to_generation(chat(), sources=(), max_tokens=77)
    assert req.max_tokens == 77
    assert req.sampling.temperature == openai_common.DEFAULT_TEMPERATURE
    assert req.speculative is None
    assert req.stop == ()


def test_messages_developer_role_and_text_parts() -> None:
    req = openai_chat.chat_to_generation(
        chat(
            messages=[
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": None},
            ]
        ),
        sources=(),
    )
    assert req.messages == (
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "ab"},
        {"role": "assistant", "content": ""},
    )


def test_sampling_fields_and_limits() -> None:
    req = openai_chat.chat_to_generation(
        chat(temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, seed=-1, stop="END", max_tokens=50,
             max_completion_tokens=9, presence_penalty=0.5, frequency_penalty=-0.5),
        sources=(),
    )  # fmt: skip
    s = req.sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p, s.seed) == (0.7, 0.9, 40, 0.05, None)
    assert (s.presence_penalty, s.frequency_penalty) == (0.5, -0.5)
    assert req.max_tokens == 9 and req.stop == ("END",)


def test_speculative_override() -> None:
    req = openai_chat.chat_to_generation(chat(speculative={"source": "lookup", "n_max": 4}), sources=())
    assert req.speculative == SpecSettings(source="lookup", n_max=4)
    req = openai_chat.chat_to_generation(chat(speculative={"n_min": 1}), sources=("draft", "lookup"))
    assert req.speculative == SpecSettings(source="draft", n_max=DEFAULT_N_MAX, n_min=1)
    req = openai_chat.chat_to_generation(
        chat(speculative={"source": "pool", "adaptive": True}), sources=("draft", "lookup")
    )
    assert req.speculative is not None and req.speculative.source == "pool" and req.speculative.adaptive
    assert openai_chat.chat_to_generation(chat(speculative={}), sources=()).speculative is None
    with pytest.raises(ApiError, match="needs a draft model"):
        openai_chat.chat_to_generation(chat(speculative={"source": "draft"}), sources=())
    # The pool and MTP can run on the target's own MTP head, which only the engine knows about: it decides (400s).
    pool = openai_chat.chat_to_generation(chat(speculative={"source": "pool"}), sources=()).speculative
    assert pool is not None and pool.source == "pool"
    # A source's own default depth when n_max is left out, as the app and `dynadraft generate --mtp` draft it.
    assert openai_chat.chat_to_generation(chat(speculative={"source": "mtp"}), sources=()).speculative == (
        SpecSettings(source="mtp", n_max=MtpSource.default_n_max)
    )
    assert MtpSource.default_n_max == 3 != DEFAULT_N_MAX
    with pytest.raises(ApiError) as e:
        openai_chat.chat_to_generation(chat(speculative={"source": "lookup", "n_max": 65}), sources=())
    assert e.value.param == "speculative.n_max"


def test_completion_prompt_forms() -> None:
    one = CompletionRequest.model_validate_json('{"model": "m", "prompt": ["abc"]}')
    assert openai_completions.completion_to_generation(one, sources=()).prompt == "abc"
    ids = CompletionRequest.model_validate_json('{"model": "m", "prompt": [[1, 2]]}')  # a batch of one
    assert openai_completions.completion_to_generation(ids, sources=()).prompt == (1, 2)
    with pytest.raises(ApiError, match="exactly one prompt"):
        openai_completions.completion_to_generation(
            CompletionRequest.model_validate_json('{"model": "m", "prompt": [[1, 2], [3]]}'), sources=()
        )


def test_validation_error_param_is_clean() -> None:
    with pytest.raises(ValidationError) as e:
        chat(stop=5)
    err = from_validation_error(e.value)
    assert err.status == 400 and err.param == "stop"
    with pytest.raises(ValidationError) as e:
        chat(messages=[{"role": "wizard", "content": "x"}])
    assert from_validation_error(e.value).param == "messages.0.role"
