"""A real `dynadraft serve` refuses what a hostile web page can send: foreign Host, Origin and non-JSON bodies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.server.browser_guard import host_allowed, is_json_media_type, normal_host
from tests.server.helpers import chat_body, dynadraft_serve

BODY = json.dumps(chat_body(max_tokens=1, model="m")).encode()


@pytest.fixture(scope="module")
def serve_url(smollm2_path: Path) -> Iterator[str]:
    args = ("--model", str(smollm2_path), "--model-id", "m", "--allowed-host", "mybox.lan")
    with dynadraft_serve(*args, "--cors-origin", "http://app.example") as (_, _, base):
        yield base.removesuffix("/v1")


def _post(url: str, headers: dict[str, str], body: bytes = BODY) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", content=body, headers=headers, timeout=60)


def _error(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code and err["message"] and err["type"]


@pytest.mark.parametrize(
    "ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/json"]
)
def test_simple_cross_site_post_is_415(serve_url: str, ctype: str) -> None:
    # A page can send these without a CORS preflight; before the fix the JSON body was parsed and generation ran.
    _error(_post(serve_url, {"Content-Type": ctype}), 415, "unsupported_media_type")


@pytest.mark.parametrize(
    "path",
    [
        "/tokenize",
        "/detokenize",
        "/apply-template",
        "/completion",
        "/infill",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/responses",
        "/v1/responses/input_tokens",
    ],
)
def test_the_other_dialects_routes_are_guarded_too(serve_url: str, path: str) -> None:
    body = json.dumps({"content": "hi", "tokens": [1]}).encode()
    r = httpx.post(f"{serve_url}{path}", content=body, headers={"Content-Type": "text/plain"})
    _error(r, 415, "unsupported_media_type")
    r = httpx.post(f"{serve_url}{path}", content=body, headers={"Content-Type": "application/json", "Host": "evil.x"})
    _error(r, 403, "host_not_allowed")


@pytest.mark.parametrize("ctype", [None, "application/json", "application/json; charset=utf-8", "application/x+json"])
def test_json_or_missing_media_type_is_served(serve_url: str, ctype: str | None) -> None:
    r = _post(serve_url, {"Content-Type": ctype} if ctype else {})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] is not None


def test_foreign_origin_is_403_and_allowed_origin_served(serve_url: str) -> None:
    _error(
        _post(serve_url, {"Content-Type": "application/json", "Origin": "http://evil.example"}),
        403,
        "origin_not_allowed",
    )
    r = httpx.get(f"{serve_url}/v1/models", headers={"Origin": "null"})
    _error(r, 403, "origin_not_allowed")
    ok = _post(serve_url, {"Content-Type": "application/json", "Origin": "http://app.example"})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "http://app.example"


@pytest.mark.parametrize("path", ["/v1/models", "/metrics", "/health", "/props"])
@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.2", "[::2]:1"]
)
def test_rebinding_host_is_403(serve_url: str, path: str, host: str) -> None:
    _error(httpx.get(f"{serve_url}{path}", headers={"Host": host}), 403, "host_not_allowed")


def test_rebinding_chat_is_403(serve_url: str) -> None:
    _error(_post(serve_url, {"Content-Type": "application/json", "Host": "evil.example"}), 403, "host_not_allowed")


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:9", "127.0.0.1:1234", "[::1]:8080", "[::1]", "app.localhost:3000", "MyBox.lan:80"]
)
def test_local_and_allowed_hosts_are_served(serve_url: str, host: str) -> None:
    r = httpx.get(f"{serve_url}/v1/models", headers={"Host": host})
    assert r.status_code == 200, r.text


def test_policy_helpers() -> None:
    assert normal_host("[::1]:8080") == "[::1]" and normal_host("LocalHost.:80") == "localhost"
    assert host_allowed("a.b.internal", frozenset({"*.internal"})) and not host_allowed(
        "internal", frozenset({"*.internal"})
    )
    assert is_json_media_type("application/problem+json") and not is_json_media_type("text/plain+json")
