"""What agents send, through the `openai` client: structured output under speculation, logprobs, precise refusals.

The endpoint runs SmolLM2 with SmolLM2 itself as the draft model (same vocabulary, a real draft-model path that
accepts often), so `speculative` can pick plain decoding, prompt lookup or the draft model per request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from app.engine.config import EngineConfig
from app.engine.worker import Engine
from app.server.runner import EndpointServer
from app.speculative.exactness import compare

MODEL = "smollm2"
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer"},
        "city": {"type": "string", "enum": ["Paris", "London", "Rome"]},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Describe a person called Ada, aged 36, living in Paris, as JSON."}]
PLAIN = {"source": "none"}
LOOKUP = {"source": "lookup", "n_max": 6}
DRAFT = {"source": "draft", "n_max": 6}


@pytest.fixture(scope="module")
def client(smollm2_path: Path) -> Iterator[openai.OpenAI]:
    config = EngineConfig(model=str(smollm2_path), draft=str(smollm2_path), n_ctx=2048, n_threads=1)
    with Engine(config).wait_ready(120) as engine:
        server = EndpointServer(engine, MODEL, port=0)
        server.start()
        try:
            with openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=120) as c:
                yield c
        finally:
            server.stop()


def _chat(client: openai.OpenAI, spec: dict[str, Any], fresh: bool = True, **kw: Any) -> Any:
    """A greedy chat request; `fresh` re-prefills the prompt, so outputs compare across requests exactly."""
    extra = {"speculative": spec, "cache_prompt": not fresh, **kw.pop("extra_body", {})}
    return client.chat.completions.create(model=MODEL, messages=ASK, temperature=0, extra_body=extra, **kw)  # type: ignore[arg-type]


def _margins(choice: Any) -> list[float]:
    """Top-1 minus top-2 logprob per token: the logit margin (same normaliser), for the near-tie criterion."""
    return [t.top_logprobs[0].logprob - t.top_logprobs[1].logprob for t in choice.logprobs.content]


def _ids(choice: Any) -> list[tuple[int, ...]]:
    return [tuple(t.bytes) for t in choice.logprobs.content]


def test_json_schema_validates_and_equals_plain_decoding_under_speculation(client: openai.OpenAI) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    runs = {}
    for name, spec in (("plain", PLAIN), ("lookup", LOOKUP), ("draft", DRAFT)):
        resp = _chat(client, spec, max_tokens=60, response_format=fmt, logprobs=True, top_logprobs=2)
        choice = resp.choices[0]
        assert choice.finish_reason == "stop", (name, choice.message.content)
        jsonschema.validate(json.loads(choice.message.content), PERSON)
        runs[name] = (choice, resp.model_extra["timings"])
    plain = runs["plain"][0]
    for name in ("lookup", "draft"):
        choice, timings = runs[name]
        assert timings["draft_n"] > 0, f"{name}: nothing was drafted"
        verdict = compare(_ids(plain), _margins(plain), _ids(choice))
        assert verdict.acceptable, f"{name}: {verdict.describe()}"
        if verdict.identical:
            assert choice.message.content == plain.message.content
    assert runs["draft"][1]["draft_n_accepted"] > 0  # the draft model proposes what the grammar admits


def test_json_object_streamed_and_a_grammar_field(client: openai.OpenAI) -> None:
    stream = _chat(client, LOOKUP, max_tokens=40, response_format={"type": "json_object"}, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text.lstrip().startswith("{")
    # llama.cpp's own `grammar` field (GBNF), under the draft model
    resp = _chat(client, DRAFT, max_tokens=12, extra_body={"grammar": 'root ::= ("yes" | "no") "."'})
    assert resp.choices[0].message.content in ("yes.", "no.")


def test_sampled_constrained_output_follows_the_schema(client: openai.OpenAI) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    for spec in (LOOKUP, DRAFT):
        resp = client.chat.completions.create(
            model=MODEL,
            messages=ASK,  # type: ignore[arg-type]
            temperature=0.8,
            seed=7,
            max_tokens=60,
            response_format=fmt,  # type: ignore[arg-type]
            extra_body={"speculative": spec},
        )
        assert resp.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(resp.choices[0].message.content or ""), PERSON)


def test_chat_logprobs_same_with_and_without_speculation(client: openai.OpenAI) -> None:
    runs = [_chat(client, spec, max_tokens=16, logprobs=True, top_logprobs=3).choices[0] for spec in (PLAIN, LOOKUP)]
    for choice in runs:
        content = choice.logprobs.content
        assert content and len(content) <= 16
        assert "".join(t.token for t in content) == choice.message.content
        for t in content:
            assert t.logprob <= 0.0 and len(t.top_logprobs) == 3
            assert all(a.logprob >= b.logprob for a, b in zip(t.top_logprobs, t.top_logprobs[1:], strict=False))
            assert t.logprob <= t.top_logprobs[0].logprob + 1e-6
    plain, spec = runs
    if _ids(plain) == _ids(spec):  # the same tokens: the same rows' values, up to batch-size numerics
        for a, b in zip(plain.logprobs.content, spec.logprobs.content, strict=True):
            assert abs(a.logprob - b.logprob) < 0.05


def test_streamed_logprobs_concatenate_to_the_text(client: openai.OpenAI) -> None:
    stream = _chat(client, LOOKUP, max_tokens=16, logprobs=True, stream=True)
    text, tokens = "", []
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            if chunk.choices[0].logprobs:
                tokens += chunk.choices[0].logprobs.content
    assert text and "".join(t.token for t in tokens) == text
    assert all(t.logprob <= 0.0 for t in tokens)


def test_completion_logprobs(client: openai.OpenAI) -> None:
    resp = client.completions.create(
        model=MODEL, prompt="The capital of France is", max_tokens=6, temperature=0, logprobs=2
    )
    choice = resp.choices[0]
    lp = choice.logprobs
    assert lp is not None and lp.tokens and lp.token_logprobs and lp.top_logprobs and lp.text_offset
    assert "".join(lp.tokens) == choice.text
    assert all(v <= 0.0 for v in lp.token_logprobs)
    assert all(len(top) == 2 for top in lp.top_logprobs)
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)


@pytest.mark.parametrize(
    ("kwargs", "param", "needle"),
    [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}},
         "response_format.json_schema.schema", "invalid JSON schema"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
         "response_format.json_schema", "needs json_schema.schema"),
        ({"response_format": {"type": "yaml"}}, "response_format.type", "'yaml'"),
        ({"extra_body": {"grammar": "root ::= undefined-rule"}}, None, "Undefined rule identifier"),
        ({"extra_body": {"grammar": 'root ::= "a"', "json_schema": {"type": "object"}}}, "json_schema", "only one"),
        ({"top_logprobs": 2}, "top_logprobs", "needs logprobs"),
        ({"logprobs": True, "top_logprobs": 50}, "top_logprobs", "[0, 20]"),
        ({"tool_choice": "required"}, "tool_choice", "needs tools"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}],
          "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice.function.name", "'g'"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "nope"}}}],
          "tool_choice": "required"}, "tools", "invalid JSON schema"),
        ({"extra_body": {"functions": [{"name": "f"}]}}, "functions", "send tools"),
    ],
)  # fmt: skip
def test_precise_400s(client: openai.OpenAI, kwargs: dict[str, Any], param: str | None, needle: str) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=4, **kwargs)  # type: ignore[arg-type]
    body = e.value.body
    assert isinstance(body, dict)
    assert needle in body["message"], body
    assert body["param"] == param, body


def test_tool_choice_named_forces_a_parsed_call(client: openai.OpenAI) -> None:
    tools = [
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "maxLength": 12}},
                    "required": ["city"],
                },
            },
        },
    ]
    # SmolLM2's template cannot show tools: they are described in the system message instead.
    bare = _chat(client, PLAIN, False, max_tokens=1)
    told = _chat(client, PLAIN, False, max_tokens=1, tools=tools)
    assert told.usage.prompt_tokens > bare.usage.prompt_tokens + 40
    choice = {"type": "function", "function": {"name": "get_weather"}}
    for spec in (LOOKUP, DRAFT):
        resp = _chat(client, spec, False, max_tokens=60, tools=tools, tool_choice=choice, parallel_tool_calls=False)
        out = resp.choices[0]
        assert out.finish_reason == "tool_calls"
        assert out.message.tool_calls and len(out.message.tool_calls) == 1
        call = out.message.tool_calls[0]
        assert call.function.name == "get_weather" and call.id.startswith("call_")
        assert isinstance(json.loads(call.function.arguments)["city"], str)


def test_a_malformed_call_from_the_model_is_plain_content(client: openai.OpenAI) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    broken = 'root ::= "<tool_call>\\n{\\"name\\": f, oops}\\n</tool_call>"'
    for stream in (False, True):
        resp = _chat(client, LOOKUP, False, max_tokens=30, tools=tools, stream=stream, extra_body={"grammar": broken})
        if stream:
            chunks = [c for c in resp if c.choices]
            assert not any(c.choices[0].delta.tool_calls for c in chunks)
            content = "".join(c.choices[0].delta.content or "" for c in chunks)
            reason = chunks[-1].choices[0].finish_reason
        else:
            content, reason = resp.choices[0].message.content, resp.choices[0].finish_reason
            assert resp.choices[0].message.tool_calls is None
        assert content == '<tool_call>\n{"name": f, oops}\n</tool_call>'
        assert reason == "stop"
