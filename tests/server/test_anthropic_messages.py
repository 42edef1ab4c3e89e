"""Anthropic's Messages API through the real `anthropic` SDK: each request answers as the chat completion it maps
to (same text, same prompt tokens), streams as Anthropic's events, calls tools, and refuses what it cannot honour
with Anthropic's error envelope. SmolLM2 behind the in-process endpoint; Qwen2.5-Coder behind `dynadraft serve`
for tool calls (SmolLM2's template has no tools)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from app.engine.config import EngineConfig
from app.engine.worker import Engine
from app.server.anthropic_messages import MessagesRequest, to_chat
from app.server.runner import EndpointServer
from tests.server.helpers import MODEL_ID, dynadraft_serve

GREEDY = {"temperature": 0}  # the SDK has no temperature argument any more; the field is still read
SYSTEM = "You are terse."
QUESTION = [{"role": "user", "content": "Name three primary colours."}]


@pytest.fixture
def claude(base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key="x", max_retries=0, timeout=120)


@pytest.fixture
def chat(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=120)


def _prompt_tokens(usage: anthropic.types.Usage) -> int:
    return usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)


def test_a_message_answers_as_its_chat_completion(claude: anthropic.Anthropic, chat: openai.OpenAI) -> None:
    msg = claude.messages.create(model=MODEL_ID, max_tokens=12, system=SYSTEM, messages=QUESTION, extra_body=GREEDY)
    same = chat.chat.completions.create(
        model=MODEL_ID,
        max_tokens=12,
        temperature=0,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION[0]["content"]}],
    )
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_")
    assert [b.type for b in msg.content] == ["text"]
    assert msg.content[0].text == same.choices[0].message.content
    assert same.usage is not None and _prompt_tokens(msg.usage) == same.usage.prompt_tokens
    assert msg.usage.output_tokens == same.usage.completion_tokens
    want = {"length": "max_tokens", "stop": "end_turn"}[same.choices[0].finish_reason]
    assert msg.stop_reason == want and msg.stop_sequence is None
    # what ran is said here as in every other dialect
    extra = msg.model_extra or {}
    assert extra["dynamic_draft"]["prompt_tokens"] == same.usage.prompt_tokens and "timings" in extra
    # count_tokens counts what the model saw, without generating
    count = claude.messages.count_tokens(model=MODEL_ID, system=SYSTEM, messages=QUESTION)
    assert count.input_tokens == same.usage.prompt_tokens


def test_the_stream_is_anthropics_events_and_joins_to_the_message(claude: anthropic.Anthropic, base_url: str) -> None:
    body = {"model": MODEL_ID, "max_tokens": 10, "messages": QUESTION}
    whole = claude.messages.create(**body, extra_body=GREEDY)
    with claude.messages.stream(**body, extra_body=GREEDY) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text == final.content[0].text
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens
    assert _prompt_tokens(final.usage) == _prompt_tokens(whole.usage)  # the whole usage comes in message_delta
    # on the wire: named events, one block opened and closed, no [DONE]
    with httpx.stream("POST", f"{base_url}/v1/messages", json={**body, **GREEDY, "stream": True}, timeout=120) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    datas = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert [d["type"] for d in datas] == names and "data: [DONE]" not in lines
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-4:] == ["content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert {d["index"] for d in datas if "index" in d} == {0}
    assert datas[-2]["dynamic_draft"] is not None and datas[-2]["delta"]["stop_reason"] == whole.stop_reason


def test_stop_sequences_and_max_tokens_say_why_it_stopped(claude: anthropic.Anthropic) -> None:
    first = claude.messages.create(model=MODEL_ID, max_tokens=8, messages=QUESTION, extra_body=GREEDY)
    word = first.content[0].text.split()[1]
    cut = claude.messages.create(
        model=MODEL_ID, max_tokens=8, messages=QUESTION, stop_sequences=[word], extra_body=GREEDY
    )
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == word
    assert word not in cut.content[0].text
    short = claude.messages.create(model=MODEL_ID, max_tokens=1, messages=QUESTION, extra_body=GREEDY)
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 1


def test_output_config_format_is_a_schema_the_reply_follows(claude: anthropic.Anthropic) -> None:
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    msg = claude.messages.create(
        model=MODEL_ID,
        max_tokens=40,
        messages=[{"role": "user", "content": "Name a primary colour as JSON."}],
        output_config={"format": {"type": "json_schema", "schema": schema}},
        extra_body=GREEDY,
    )
    assert isinstance(json.loads(msg.content[0].text)["colour"], str)


def test_claude_codes_changing_billing_stamp_does_not_defeat_the_cache(claude: anthropic.Anthropic) -> None:
    def ask(stamp: str) -> anthropic.types.Message:
        system = f"x-anthropic-billing-header: cc_version=2.1.0; cc_entrypoint=cli; cch={stamp};You are a helper."
        return claude.messages.create(model=MODEL_ID, max_tokens=2, system=system, messages=QUESTION, extra_body=GREEDY)

    first, second = ask("a5145"), ask("9be01")
    assert _prompt_tokens(first.usage) == _prompt_tokens(second.usage)
    # the second prompt is the first's token for token, so all but the last token comes from the cache
    assert (second.usage.cache_read_input_tokens or 0) >= _prompt_tokens(second.usage) - 1


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": "AA=="}}]}
                ]
            },
            "messages.0.content.0.type",
        ),
        ({"messages": QUESTION, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools.0.type"),
        ({"messages": QUESTION, "tool_choice": {"type": "tool"}}, "tool_choice.name"),
        ({"messages": QUESTION, "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]}, None),
    ],
)
def test_bad_requests_are_anthropic_errors_naming_the_field(
    claude: anthropic.Anthropic, body: dict[str, object], param: str | None
) -> None:
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(**{"model": MODEL_ID, "max_tokens": 4, **body})
    err = e.value.body
    assert isinstance(err, dict) and err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    if param is not None:
        assert err["error"]["param"] == param, err


def test_unknown_model_and_envelopes(claude: anthropic.Anthropic, base_url: str) -> None:
    with pytest.raises(anthropic.NotFoundError) as e:
        claude.messages.create(model="claude-sonnet-4-5", max_tokens=4, messages=QUESTION)
    assert MODEL_ID in str(e.value)  # says which name to use instead
    # OpenAI's routes keep OpenAI's envelope
    r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": MODEL_ID, "messages": []}, timeout=30)
    assert r.status_code == 400 and "type" not in r.json() and r.json()["error"]["param"] == "messages"
    # the models route reads in both SDKs
    page = claude.models.list()
    assert [m.id for m in page.data] == [MODEL_ID] and page.data[0].type == "model"
    assert page.data[0].max_input_tokens == 2048  # the window, where Anthropic's clients read it
    assert claude.models.retrieve(MODEL_ID).display_name == MODEL_ID


def test_x_api_key_is_accepted_as_anthropic_clients_send_it(engine: Engine) -> None:
    with EndpointServer(engine, MODEL_ID, port=0, api_key="s3cret") as srv:
        with pytest.raises(anthropic.AuthenticationError) as e:
            anthropic.Anthropic(base_url=srv.url, api_key="nope", max_retries=0).messages.create(
                model=MODEL_ID,
                max_tokens=1,
                messages=QUESTION,
            )
        assert isinstance(e.value.body, dict) and e.value.body["error"]["type"] == "authentication_error"
        good = anthropic.Anthropic(base_url=srv.url, api_key="s3cret", max_retries=0)
        assert good.messages.create(model=MODEL_ID, max_tokens=1, messages=QUESTION).usage.output_tokens == 1


def test_the_mapping_keeps_anthropics_meaning() -> None:
    """What the SDK tests cannot see: tool results go first (templates read them right after the call), is_error
    reaches the model, a named tool is forced (not any), and thinking switches the template's enable_thinking."""
    req = MessagesRequest.model_validate(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Use the tool.", "signature": "sig"},
                        {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "down"}],
                            "is_error": True,
                        },
                        {"type": "text", "text": "And now?"},
                    ],
                },
            ],
            "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "weather", "disable_parallel_tool_use": True},
            "thinking": {"type": "disabled"},
        }
    )
    chat = to_chat(req)
    roles = [(m.role, m.content) for m in chat.messages]
    assert roles == [("user", "Weather?"), ("assistant", ""), ("tool", "Error: down"), ("user", "And now?")]
    call = chat.messages[1].tool_calls[0]
    assert call.id == "t1" and json.loads(call.function.arguments) == {"city": "Oslo"}
    assert chat.messages[1].reasoning_content == "Use the tool." and chat.messages[2].tool_call_id == "t1"
    assert chat.tool_choice is not None and chat.tool_choice.function.name == "weather"
    assert chat.parallel_tool_calls is False and chat.chat_template_kwargs == {"enable_thinking": False}


WEATHER = {
    "name": "get_weather",
    "description": "Get the weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_tool_use_round_trip_on_a_served_coder(qwen_pair: tuple[Path, Path]) -> None:
    _, coder = qwen_pair
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    with dynadraft_serve("--model", str(coder)) as (client, name, base):
        claude = anthropic.Anthropic(base_url=base.removesuffix("/v1"), api_key="x", max_retries=0, timeout=180)
        msg = claude.messages.create(model=name, max_tokens=40, tools=[WEATHER], messages=ask, extra_body=GREEDY)
        assert msg.stop_reason == "tool_use"
        use = [b for b in msg.content if b.type == "tool_use"]
        assert len(use) == 1 and use[0].name == "get_weather" and use[0].input == {"city": "Paris"}
        # streamed: a tool_use block whose input arrives as input_json_delta
        with claude.messages.stream(model=name, max_tokens=40, tools=[WEATHER], messages=ask, extra_body=GREEDY) as s:
            kinds = [ev.delta.type for ev in s if ev.type == "content_block_delta"]
            streamed = s.get_final_message()
        assert "input_json_delta" in kinds and streamed.stop_reason == "tool_use"
        assert [b.input for b in streamed.content if b.type == "tool_use"] == [{"city": "Paris"}]
        # the result goes back as Anthropic sends it, and the model sees what the same OpenAI history gives it
        result = [{"type": "tool_result", "tool_use_id": use[0].id, "content": "18 C and sunny"}]
        history = [*ask, {"role": "assistant", "content": msg.content}, {"role": "user", "content": result}]
        after = claude.messages.create(model=name, max_tokens=12, tools=[WEATHER], messages=history, extra_body=GREEDY)
        same = client.chat.completions.create(
            model=name,
            max_tokens=12,
            temperature=0,
            tools=[
                {
                    "type": "function",
                    "function": {k.replace("input_schema", "parameters"): v for k, v in WEATHER.items()},
                }
            ],
            messages=[
                ask[0],
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": use[0].id,
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": json.dumps(use[0].input)},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": use[0].id, "content": "18 C and sunny"},
            ],
        )
        assert same.usage is not None and _prompt_tokens(after.usage) == same.usage.prompt_tokens
        got = "".join(b.text for b in after.content if b.type == "text")
        assert got == (same.choices[0].message.content or "")


def _nearly_full(claude: anthropic.Anthropic, n_ctx: int) -> tuple[list[dict[str, str]], int]:
    """A list of numbers to continue that leaves 1-8 tokens of the window (measured by count_tokens): the model goes
    on counting, so only the window ends it. Returns (messages, the room left)."""

    def numbers(k: int) -> list[dict[str, str]]:
        return [{"role": "user", "content": ", ".join(str(i) for i in range(1, k)) + ","}]

    def room(k: int) -> int:
        return n_ctx - claude.messages.count_tokens(model=MODEL_ID, messages=numbers(k)).input_tokens

    lo, hi = 1, n_ctx  # room(lo) > 0 >= room(hi): find the longest list that still leaves room
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if room(mid) > 0 else (lo, mid)
    assert 1 <= room(lo) <= 8
    return numbers(lo), room(lo)


@pytest.fixture
def small_window(smollm2_path: Path) -> Iterator[str]:
    """An endpoint whose window is 512 tokens: filling it costs a quarter of the shared endpoint's 2,048."""
    engine = Engine(EngineConfig(model=str(smollm2_path), n_ctx=512, n_threads=1)).wait_ready(120)
    srv = EndpointServer(engine, MODEL_ID, port=0)
    srv.start()
    try:
        yield srv.url
    finally:
        srv.stop()
        engine.close()


def test_max_tokens_is_a_bound_and_the_window_ends_the_reply(small_window: str) -> None:
    """Claude Code asks for 32,000 tokens whatever the window (512 here): the reply runs to the window's end and
    says so, where the OpenAI route refuses the same request; a prompt past the window is 'prompt is too long'."""
    base_url = small_window
    claude = anthropic.Anthropic(base_url=base_url, api_key="x", max_retries=0, timeout=120)
    messages, room = _nearly_full(claude, 512)
    msg = claude.messages.create(model=MODEL_ID, max_tokens=32000, messages=messages, extra_body=GREEDY)
    assert (msg.usage.output_tokens, msg.stop_reason) == (room, "model_context_window_exceeded"), msg.content
    body = {"model": MODEL_ID, "max_tokens": 32000, "messages": messages, "temperature": 0}
    refused = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "context_length_exceeded"
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model=MODEL_ID, max_tokens=8, messages=[{"role": "user", "content": "one " * 1000}])
    assert isinstance(e.value.body, dict) and e.value.body["error"]["message"].startswith("prompt is too long")


def test_a_system_message_inside_the_conversation_is_kept(claude: anthropic.Anthropic, chat: openai.OpenAI) -> None:
    # Claude Code's current form: a system message after the first user turn (its reminders and context)
    turns = [
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Name a colour."},
    ]
    msg = claude.messages.create(model=MODEL_ID, max_tokens=6, messages=turns, extra_body=GREEDY)
    same = chat.chat.completions.create(model=MODEL_ID, max_tokens=6, temperature=0, messages=turns)
    assert same.usage is not None and _prompt_tokens(msg.usage) == same.usage.prompt_tokens
    assert msg.content[0].text == same.choices[0].message.content
