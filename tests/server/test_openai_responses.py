"""OpenAI's Responses API through the real `openai` SDK (whose stream reader checks every event's order and ids):
each request answers as the chat completion it maps to, streams as Responses events, calls function tools, says
which tools it could not offer, and refuses what it cannot honour. SmolLM2 behind the in-process endpoint;
Qwen2.5-Coder behind `dynadraft serve` for tool calls."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from app.server.openai_responses import ResponsesRequest, to_chat
from tests.server.helpers import MODEL_ID, dynadraft_serve

QUESTION = "Name three primary colours."


@pytest.fixture
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=120)


def test_a_response_answers_as_its_chat_completion(client: openai.OpenAI) -> None:
    r = client.responses.create(
        model=MODEL_ID, input=QUESTION, instructions="You are terse.", max_output_tokens=12, temperature=0
    )
    same = client.chat.completions.create(
        model=MODEL_ID,
        max_tokens=12,
        temperature=0,
        messages=[{"role": "system", "content": "You are terse."}, {"role": "user", "content": QUESTION}],
    )
    assert r.object == "response" and r.id.startswith("resp_") and [o.type for o in r.output] == ["message"]
    assert r.output_text == same.choices[0].message.content
    assert same.usage is not None and r.usage is not None
    assert (r.usage.input_tokens, r.usage.output_tokens) == (same.usage.prompt_tokens, same.usage.completion_tokens)
    finished = same.choices[0].finish_reason == "stop"
    assert r.status == ("completed" if finished else "incomplete")
    assert finished or (r.incomplete_details is not None and r.incomplete_details.reason == "max_output_tokens")
    assert (r.model_extra or {})["dynamic_draft"]["prompt_tokens"] == same.usage.prompt_tokens
    count = client.responses.input_tokens.count(model=MODEL_ID, input=QUESTION, instructions="You are terse.")
    assert count.input_tokens == same.usage.prompt_tokens


def test_the_stream_passes_the_sdks_checks_and_joins_to_the_response(client: openai.OpenAI, base_url: str) -> None:
    body = {"model": MODEL_ID, "input": QUESTION, "max_output_tokens": 10, "temperature": 0}
    whole = client.responses.create(**body)
    with client.responses.stream(**body) as stream:
        events = list(stream)
    # the terminal event carries the whole Response; a max_output_tokens cut ends in response.incomplete, as
    # OpenAI's does (openai-python's get_final_response() still expects response.completed there)
    last = events[-1]
    assert last.type == {"completed": "response.completed", "incomplete": "response.incomplete"}[whole.status or ""]
    final = last.response
    deltas = [ev.delta for ev in events if ev.type == "response.output_text.delta"]
    assert "".join(deltas) == whole.output_text == final.output_text
    assert (
        final.usage is not None and whole.usage is not None and final.usage.output_tokens == whole.usage.output_tokens
    )
    with httpx.stream("POST", f"{base_url}/v1/responses", json={**body, "stream": True}, timeout=120) as r:
        assert r.status_code == 200
        lines = [line for line in r.iter_lines() if line]
    datas = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert [d["sequence_number"] for d in datas] == list(range(len(datas))) and "data: [DONE]" not in lines
    assert datas[0]["type"] == "response.created" and datas[-1]["type"] in ("response.completed", "response.incomplete")
    assert datas[-1]["response"]["dynamic_draft"] is not None


def test_json_schema_text_format_is_followed(client: openai.OpenAI) -> None:
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    r = client.responses.create(
        model=MODEL_ID,
        input="Name a primary colour as JSON.",
        max_output_tokens=40,
        temperature=0,
        text={"format": {"type": "json_schema", "name": "colour", "schema": schema}},
    )
    assert isinstance(json.loads(r.output_text)["colour"], str)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": []}, "input"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input.0.content.0.type",
        ),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input.0.type"),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input.0.call_id"),
        ({"input": "x", "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice.name"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ],
)
def test_bad_requests_name_the_field(client: openai.OpenAI, body: dict[str, object], param: str) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL_ID, **body)
    assert isinstance(e.value.body, dict) and e.value.body["param"] == param, e.value.body


def test_the_mapping_keeps_the_conversations_meaning() -> None:
    """Reasoning goes to the assistant turn it belongs to, function calls join it, outputs become tool messages; a
    namespace's functions are offered by name; hosted tools are named as not offered."""
    req = ResponsesRequest.model_validate(
        {
            "model": "m",
            "instructions": "Be brief.",
            "input": [
                {"role": "developer", "content": "Use tools."},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Ask the tool."}]},
                {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Oslo"}'},
                {"type": "function_call_output", "call_id": "c1", "output": "rain"},
                {"role": "assistant", "content": [{"type": "output_text", "text": "It rains."}]},
            ],
            "tools": [
                {"type": "function", "name": "weather", "parameters": {"type": "object"}},
                {"type": "namespace", "name": "agents", "tools": [{"type": "function", "name": "spawn"}]},
                {"type": "web_search"},
            ],
        }
    )
    mapped = to_chat(req)
    roles = [(m.role, m.content) for m in mapped.chat.messages]
    assert roles == [
        ("system", "Be brief."),
        ("developer", "Use tools."),
        ("user", "Weather?"),
        ("assistant", ""),
        ("tool", "rain"),
        ("assistant", "It rains."),
    ]
    call_turn = mapped.chat.messages[3]
    assert call_turn.reasoning_content == "Ask the tool." and call_turn.tool_calls is not None
    assert call_turn.tool_calls[0].id == "c1" and mapped.chat.messages[4].tool_call_id == "c1"
    assert [t.function.name for t in mapped.chat.tools or ()] == ["weather", "spawn"]
    assert mapped.namespaces == {"spawn": "agents"} and mapped.echo["tools_not_offered"] == ["web_search"]


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_function_call_round_trip_on_a_served_coder(qwen_pair: tuple[Path, Path]) -> None:
    _, coder = qwen_pair
    ask = "What is the weather in Paris?"
    with dynadraft_serve("--model", str(coder)) as (client, name, _):
        tools = [WEATHER, {"type": "web_search"}]
        r = client.responses.create(model=name, input=ask, tools=tools, max_output_tokens=40, temperature=0)
        calls = [o for o in r.output if o.type == "function_call"]
        assert r.status == "completed" and len(calls) == 1
        assert calls[0].name == "get_weather" and json.loads(calls[0].arguments) == {"city": "Paris"}
        assert (r.model_extra or {})["tools_not_offered"] == ["web_search"]
        with client.responses.stream(model=name, input=ask, tools=tools, max_output_tokens=40, temperature=0) as s:
            kinds = [ev.type for ev in s]
            streamed = s.get_final_response()
        assert "response.function_call_arguments.delta" in kinds
        assert [o.name for o in streamed.output if o.type == "function_call"] == ["get_weather"]
        # the output goes back as Codex sends it (the whole conversation, nothing stored), and the model sees what
        # the same OpenAI chat history gives it
        history = [
            {"role": "user", "content": ask},
            calls[0].model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C and sunny"},
        ]
        after = client.responses.create(model=name, input=history, tools=tools, max_output_tokens=12, temperature=0)
        same = client.chat.completions.create(
            model=name,
            max_tokens=12,
            temperature=0,
            tools=[{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}],
            messages=[
                {"role": "user", "content": ask},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": calls[0].call_id,
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": calls[0].arguments},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": calls[0].call_id, "content": "18 C and sunny"},
            ],
        )
        assert same.usage is not None and after.usage is not None
        assert after.usage.input_tokens == same.usage.prompt_tokens
        assert after.output_text == (same.choices[0].message.content or "")
