"""Malformed and unsupported requests: each gets a 4xx with OpenAI's error schema, and none kills the server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.helpers import MAX_BODY, MODEL_ID, chat_body

CHAT = "/v1/chat/completions"
COMPL = "/v1/completions"


def _without(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != key}


def _msgs(*messages: Any) -> dict[str, Any]:
    return chat_body(messages=list(messages))


def _compl(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL_ID, "prompt": "Hello", "max_tokens": 4, "temperature": 0}
    body.update(fields)
    return body


def _chunked(data: bytes, piece: int = 16384) -> Iterator[bytes]:
    for i in range(0, len(data), piece):
        yield data[i : i + piece]


LONG = "word " * 3000  # ~3000 tokens: beyond the test engine's n_ctx of 2048

# (id, method, path, how to send, expected status, expected error code or None)
CASES: list[tuple[str, str, str, dict[str, Any], int, str | None]] = [
    ("bad-json", "POST", CHAT, {"content": b'{"model": "smollm2", '}, 400, "invalid_json"),
    ("empty-body", "POST", CHAT, {"content": b""}, 400, "invalid_json"),
    ("json-array", "POST", CHAT, {"json": [1, 2]}, 400, None),
    ("json-string", "POST", CHAT, {"json": "hello"}, 400, None),
    ("not-utf8", "POST", CHAT, {"content": b"\xff\xfe{}"}, 400, None),
    ("missing-model", "POST", CHAT, {"json": _without(chat_body(), "model")}, 400, None),
    ("missing-messages", "POST", CHAT, {"json": _without(chat_body(), "messages")}, 400, None),
    ("messages-not-list", "POST", CHAT, {"json": chat_body(messages="hi")}, 400, None),
    ("messages-empty", "POST", CHAT, {"json": chat_body(messages=[])}, 400, None),
    ("message-no-role", "POST", CHAT, {"json": _msgs({"content": "hi"})}, 400, None),
    ("unknown-role", "POST", CHAT, {"json": _msgs({"role": "wizard", "content": "hi"})}, 400, None),
    ("content-int", "POST", CHAT, {"json": _msgs({"role": "user", "content": 42})}, 400, None),
    ("content-null-user", "POST", CHAT, {"json": _msgs({"role": "user", "content": None})}, 400, None),
    (
        "image-part",
        "POST",
        CHAT,
        {"json": _msgs({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]})},
        400,
        "unsupported_feature",
    ),
    ("function-role", "POST", CHAT, {"json": _msgs({"role": "function", "name": "f", "content": "x"})}, 400, None),
    ("max-tokens-negative", "POST", CHAT, {"json": chat_body(max_tokens=-5)}, 400, None),
    ("max-tokens-zero", "POST", CHAT, {"json": chat_body(max_tokens=0)}, 400, None),
    ("max-tokens-huge", "POST", CHAT, {"json": chat_body(max_tokens=10**9)}, 400, "context_length_exceeded"),
    ("max-tokens-string", "POST", CHAT, {"json": chat_body(max_tokens="16")}, 400, None),
    ("max-tokens-float", "POST", CHAT, {"json": chat_body(max_tokens=1.5)}, 400, None),
    ("max-completion-tokens-neg", "POST", CHAT, {"json": chat_body(max_completion_tokens=-2)}, 400, None),
    ("temperature-string", "POST", CHAT, {"json": chat_body(temperature="hot")}, 400, None),
    ("temperature-negative", "POST", CHAT, {"json": chat_body(temperature=-1)}, 400, None),
    ("temperature-huge", "POST", CHAT, {"json": chat_body(temperature=1000)}, 400, None),
    ("top-p-zero", "POST", CHAT, {"json": chat_body(top_p=0)}, 400, None),
    ("top-p-two", "POST", CHAT, {"json": chat_body(top_p=2)}, 400, None),
    ("presence-penalty-5", "POST", CHAT, {"json": chat_body(presence_penalty=5)}, 400, None),
    ("frequency-penalty-bool", "POST", CHAT, {"json": chat_body(frequency_penalty=True)}, 400, None),
    ("stop-int", "POST", CHAT, {"json": chat_body(stop=7)}, 400, None),
    ("stop-empty-string", "POST", CHAT, {"json": chat_body(stop=["ok", ""])}, 400, None),
    ("stop-too-many", "POST", CHAT, {"json": chat_body(stop=[f"s{i}" for i in range(9)])}, 400, None),
    ("seed-string", "POST", CHAT, {"json": chat_body(seed="abc")}, 400, None),
    ("seed-negative", "POST", CHAT, {"json": chat_body(seed=-5)}, 400, None),
    ("stream-string", "POST", CHAT, {"json": chat_body(stream="yes")}, 400, None),
    ("stream-options-wrong", "POST", CHAT, {"json": chat_body(stream=True, stream_options="all")}, 400, None),
    ("n-2", "POST", CHAT, {"json": chat_body(n=2)}, 400, "unsupported_feature"),
    ("tools", "POST", CHAT, {"json": chat_body(tools=[{"type": "function"}])}, 400, "invalid_request"),
    ("tool-choice", "POST", CHAT, {"json": chat_body(tool_choice="required")}, 400, "invalid_request"),
    ("functions", "POST", CHAT, {"json": chat_body(functions=[{"name": "f"}])}, 400, "unsupported_feature"),
    ("json-mode", "POST", CHAT, {"json": chat_body(response_format={"type": "json_schema"})}, 400, "invalid_request"),
    ("bad-schema", "POST", CHAT, {"json": chat_body(json_schema={"type": 3})}, 400, "invalid_schema"),
    ("bad-grammar", "POST", CHAT, {"json": chat_body(grammar="root ::= (")}, 400, "invalid_request"),
    ("logprobs", "POST", CHAT, {"json": chat_body(top_logprobs=2)}, 400, "invalid_request"),
    ("logit-bias-past-vocab", "POST", CHAT, {"json": chat_body(logit_bias={"50256": -100})}, 400, "invalid_request"),
    ("spec-n-max-999", "POST", CHAT, {"json": chat_body(speculative={"source": "lookup", "n_max": 999})}, 400, None),
    ("spec-bad-source", "POST", CHAT, {"json": chat_body(speculative={"source": "magic"})}, 400, None),
    ("spec-unknown-field", "POST", CHAT, {"json": chat_body(speculative={"depth": 4})}, 400, None),
    ("spec-p-min-2", "POST", CHAT, {"json": chat_body(speculative={"source": "lookup", "p_min": 2.0})}, 400, None),
    (
        "spec-n-min-gt-n-max",
        "POST",
        CHAT,
        {"json": chat_body(speculative={"source": "lookup", "n_max": 2, "n_min": 5})},
        400,
        None,
    ),
    ("spec-draft-without-draft", "POST", CHAT, {"json": chat_body(speculative={"source": "draft"})}, 400, None),
    ("spec-not-object", "POST", CHAT, {"json": chat_body(speculative="fast")}, 400, None),
    ("spec-adaptive-string", "POST", CHAT, {"json": chat_body(speculative={"adaptive": "yes"})}, 400, None),
    ("spec-cost-stop-number", "POST", CHAT, {"json": chat_body(speculative={"cost_stop": 1})}, 400, None),
    ("unknown-model", "POST", CHAT, {"json": chat_body(model="gpt-4o")}, 404, "model_not_found"),
    ("empty-model", "POST", CHAT, {"json": chat_body(model="")}, 400, None),
    ("prompt-beyond-ctx", "POST", CHAT, {"json": chat_body(LONG)}, 400, "context_length_exceeded"),
    ("prompt-beyond-ctx-stream", "POST", CHAT, {"json": chat_body(LONG, stream=True)}, 400, "context_length_exceeded"),
    (
        "prompt-beyond-ctx-no-max",
        "POST",
        CHAT,
        {"json": _without(chat_body(LONG), "max_tokens")},
        400,
        "context_length_exceeded",
    ),
    ("oversized-body", "POST", CHAT, {"json": chat_body("x" * (MAX_BODY + 10))}, 413, "request_too_large"),
    (
        "oversized-chunked",
        "POST",
        CHAT,
        {"content": _chunked(json.dumps(chat_body("y" * (MAX_BODY + 10))).encode())},
        413,
        "request_too_large",
    ),
    (
        "oversized-chunked-2x",
        "POST",
        CHAT,
        {"content": _chunked(json.dumps(chat_body("z" * (2 * MAX_BODY))).encode())},
        413,
        "request_too_large",
    ),
    ("compl-missing-prompt", "POST", COMPL, {"json": _without(_compl(), "prompt")}, 400, None),
    ("compl-token-id-outside", "POST", COMPL, {"json": _compl(prompt=[1, 49152])}, 400, "invalid_request"),
    ("compl-token-id-negative", "POST", COMPL, {"json": _compl(prompt=[[5, -1]])}, 400, "invalid_request"),
    ("compl-token-id-huge", "POST", COMPL, {"json": _compl(prompt=[2**63])}, 400, None),
    ("compl-token-id-batch", "POST", COMPL, {"json": _compl(prompt=[[1, 2], [3]])}, 400, "unsupported_feature"),
    ("compl-token-id-mixed", "POST", COMPL, {"json": _compl(prompt=[1, "a"])}, 400, None),
    ("compl-token-ids-empty", "POST", COMPL, {"json": _compl(prompt=[[]])}, 400, None),
    ("compl-two-prompts", "POST", COMPL, {"json": _compl(prompt=["a", "b"])}, 400, "unsupported_feature"),
    ("compl-empty-prompt", "POST", COMPL, {"json": _compl(prompt="")}, 400, None),
    ("compl-echo", "POST", COMPL, {"json": _compl(echo=True)}, 400, "unsupported_feature"),
    ("compl-best-of", "POST", COMPL, {"json": _compl(best_of=3)}, 400, "unsupported_feature"),
    ("compl-logprobs", "POST", COMPL, {"json": _compl(logprobs=50)}, 400, "invalid_request"),
    ("compl-suffix-no-fim", "POST", COMPL, {"json": _compl(suffix="end")}, 400, "invalid_request"),  # SmolLM2
    ("compl-suffix-token-ids", "POST", COMPL, {"json": _compl(prompt=[1, 2], suffix="x")}, 400, "invalid_request"),
    ("compl-n-3", "POST", COMPL, {"json": _compl(n=3)}, 400, "unsupported_feature"),
    ("get-unknown-model", "GET", "/v1/models/gpt-4o", {}, 404, "model_not_found"),
    ("unknown-route", "GET", "/v1/nothing-here", {}, 404, None),
    ("wrong-method", "GET", CHAT, {}, 405, None),
    ("post-models", "POST", "/v1/models", {"json": {}}, 405, None),
]


@pytest.mark.parametrize(("name", "method", "path", "send", "status", "code"), CASES, ids=[c[0] for c in CASES])
def test_malformed_request(
    http: httpx.Client, name: str, method: str, path: str, send: dict[str, Any], status: int, code: str | None
) -> None:
    r = http.request(method, path, **send)
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) >= {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["type"], str) and err["type"]
    assert "Traceback" not in r.text
    if code is not None:
        assert err["code"] == code
    if status == 400:
        assert err["type"] == "invalid_request_error"


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 30


def test_server_alive_after_corpus(http: httpx.Client) -> None:
    for name, method, path, send, _, _ in CASES:
        if not name.startswith("oversized"):
            http.request(method, path, **send)
    r = http.post(CHAT, json=chat_body("Say hi.", 4))
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] is not None
