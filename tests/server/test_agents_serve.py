"""Tool calls and thinking through `dynadraft serve` and the `openai` client, where the chat template matters.

Tool calls run on Qwen2.5-Coder-0.5B, whose own template renders the tools; thinking runs SmolLM2 under a small
reasoning template (`--chat-template-file`) that opens a <think> block in the prompt, as Qwen3-style templates do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from app.models.packaged import ensure_model
from tests.server.helpers import dynadraft_serve

THINK_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{% else %}{{ '<think>\\n' }}{% endif %}{% endif %}"
)
# The real model's sampled text, shaped like a reasoning model's answer: thoughts, the closing tag, the answer.
THINK_SHAPE = 'root ::= [a-z ]{4,40} "\\n</think>\\n\\n" [A-Za-z] [A-Za-z ,.!]{3,40}'
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris right now?"}]


def _serve(*args: str) -> Iterator[tuple[openai.OpenAI, str]]:
    with dynadraft_serve(*args) as (client, model, _base):
        yield client, model


@pytest.fixture(scope="module")
def qwen() -> Iterator[tuple[openai.OpenAI, str]]:
    yield from _serve("--model", str(ensure_model("qwen2.5-coder-0.5b")))


@pytest.fixture(scope="module")
def thinker(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Iterator[tuple[openai.OpenAI, str]]:
    template = tmp_path_factory.mktemp("template") / "think.jinja"
    template.write_text(THINK_TEMPLATE)
    yield from _serve("--model", str(smollm2_path), "--chat-template-file", str(template))


def test_tool_call_round_trip(qwen: tuple[openai.OpenAI, str]) -> None:
    client, model = qwen
    messages: list[Any] = list(ASK_WEATHER)
    first = client.chat.completions.create(
        model=model, messages=messages, tools=[WEATHER], max_tokens=60, temperature=0
    )  # type: ignore[arg-type, list-item]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message.content
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert not choice.message.content
    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 18, "sky": "cloudy"})})
    final = client.chat.completions.create(
        model=model, messages=messages, tools=[WEATHER], max_tokens=40, temperature=0
    )  # type: ignore[arg-type]
    assert final.choices[0].finish_reason in ("stop", "length")
    assert final.choices[0].message.content
    # The tools and the tool result reached the model through its own template.
    plain = client.chat.completions.create(model=model, messages=ASK_WEATHER, max_tokens=1, temperature=0)  # type: ignore[arg-type]
    assert first.usage and plain.usage and final.usage
    assert first.usage.prompt_tokens > plain.usage.prompt_tokens + 50
    assert final.usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens


def test_tool_call_streamed_as_deltas_and_tool_choice_none(qwen: tuple[openai.OpenAI, str]) -> None:
    client, model = qwen
    stream = client.chat.completions.create(
        model=model,
        messages=ASK_WEATHER,  # type: ignore[arg-type]
        tools=[WEATHER],  # type: ignore[list-item]
        max_tokens=60,
        temperature=0,
        stream=True,
        extra_body={"speculative": {"source": "lookup"}},
    )
    deltas, reasons, content = [], [], ""
    for chunk in stream:
        for c in chunk.choices:
            deltas += c.delta.tool_calls or []
            content += c.delta.content or ""
            if c.finish_reason:
                reasons.append(c.finish_reason)
    assert reasons == ["tool_calls"] and not content
    assert [d.index for d in deltas] == [0] and deltas[0].id and deltas[0].function
    assert deltas[0].function.name == "get_weather" and json.loads(deltas[0].function.arguments or "") == {
        "city": "Paris"
    }
    off = client.chat.completions.create(
        model=model,
        messages=ASK_WEATHER,
        tools=[WEATHER],
        tool_choice="none",
        max_tokens=20,
        temperature=0,  # type: ignore[arg-type, list-item]
    )
    assert off.choices[0].message.tool_calls is None and off.choices[0].finish_reason != "tool_calls"


def test_thinking_split_from_the_answer(thinker: tuple[openai.OpenAI, str]) -> None:
    client, model = thinker
    ask: Any = [{"role": "user", "content": "Is the sea blue?"}]
    body = {"grammar": THINK_SHAPE}
    resp = client.chat.completions.create(model=model, messages=ask, max_tokens=60, temperature=0, extra_body=body)
    msg = resp.choices[0].message
    reasoning = (msg.model_extra or {}).get("reasoning_content")
    assert reasoning and re.fullmatch(r"[a-z ]{4,40}", reasoning), reasoning
    assert msg.content and re.fullmatch(r"[A-Za-z][A-Za-z ,.!]{3,40}", msg.content), msg.content
    assert "<think>" not in msg.content and "</think>" not in msg.content

    stream = client.chat.completions.create(
        model=model, messages=ask, max_tokens=60, temperature=0, extra_body=body, stream=True
    )
    parts = {"reasoning_content": "", "content": ""}
    for chunk in stream:
        for c in chunk.choices:
            delta = c.delta.model_dump()
            for key in parts:
                parts[key] += delta.get(key) or ""
    assert parts == {"reasoning_content": reasoning, "content": msg.content}

    raw = client.chat.completions.create(
        model=model, messages=ask, max_tokens=60, temperature=0, extra_body={**body, "reasoning_format": "none"}
    )
    assert raw.choices[0].message.content == f"{reasoning}\n</think>\n\n{msg.content}"  # as generated


def test_chat_template_kwargs_reach_the_template(thinker: tuple[openai.OpenAI, str]) -> None:
    client, model = thinker
    ask: Any = [{"role": "user", "content": "Is the sea blue?"}]
    resp = client.chat.completions.create(
        model=model,
        messages=ask,
        max_tokens=8,
        temperature=0,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    msg = resp.choices[0].message
    assert msg.content and not (msg.model_extra or {}).get("reasoning_content")
    thinking = client.chat.completions.create(model=model, messages=ask, max_tokens=1, temperature=0)
    assert resp.usage and thinking.usage and resp.usage.prompt_tokens > thinking.usage.prompt_tokens


def test_a_reasoning_budget_ends_the_thinking_and_says_so(thinker: tuple[openai.OpenAI, str]) -> None:
    """llama-server's reasoning_budget_tokens (and its other name): the block gets N tokens, then the message and
    the closing tag; usage counts the block's tokens as OpenAI's reasoning_tokens. Anthropic's thinking.budget_tokens
    is the same budget."""
    client, model = thinker
    ask: Any = [{"role": "user", "content": "Is the sea blue?"}]
    body = {"reasoning_budget_tokens": 5, "reasoning_budget_message": " Enough."}
    resp = client.chat.completions.create(model=model, messages=ask, max_tokens=30, temperature=0, extra_body=body)
    msg = resp.choices[0].message
    reasoning = (msg.model_extra or {}).get("reasoning_content") or ""
    assert reasoning.endswith("Enough.") and msg.content, msg
    assert resp.usage and resp.usage.completion_tokens_details
    assert resp.usage.completion_tokens_details.reasoning_tokens == 5
    assert (resp.model_extra or {})["reasoning_budget"] == {"budget_tokens": 5, "reasoning_tokens": 5, "forced": True}
    other = client.chat.completions.create(
        model=model,
        messages=ask,
        max_tokens=30,
        temperature=0,
        extra_body={**body, "reasoning_budget_tokens": None, "thinking_budget_tokens": 5},
    )
    assert other.choices[0].message.content == msg.content

    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(
            model=model, messages=ask, max_tokens=4, extra_body={"reasoning_budget_tokens": -2}
        )
    assert bad.value.body["param"] == "reasoning_budget_tokens"  # type: ignore[index]

    base = str(client.base_url).removesuffix("/v1/").removesuffix("/v1")
    claude = anthropic.Anthropic(base_url=base, api_key=client.api_key or "none")
    reply = claude.messages.create(
        model=model,
        max_tokens=30,
        messages=ask,
        thinking={"type": "enabled", "budget_tokens": 5},
        extra_body={"temperature": 0},
    )
    blocks = {b.type: b for b in reply.content}
    assert blocks["thinking"].thinking.strip() == reasoning.removesuffix(" Enough.").strip()  # type: ignore[union-attr]
    assert (reply.model_extra or {})["reasoning_budget"]["reasoning_tokens"] == 5
