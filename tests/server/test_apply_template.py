"""llama-server's /apply-template on the real endpoint: a chat request's prompt as the engine renders it, which
/v1/completions then completes as the chat request does; what a chat request refuses, it refuses."""

from __future__ import annotations

import httpx
import openai

from app.engine.types import GenerationRequest
from app.engine.worker import Engine
from app.server.runner import EndpointServer
from tests.server.helpers import MODEL_ID

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colours."}]


def test_the_prompt_is_the_chat_requests_and_completes_as_the_chat_does(
    base_url: str, http: httpx.Client, engine: Engine
) -> None:
    r = http.post("/apply-template", json={"model": MODEL_ID, "messages": MESSAGES})
    assert r.status_code == 200, r.text
    prompt = r.json()["prompt"]
    req = GenerationRequest(messages=tuple(MESSAGES), max_tokens=1)
    assert prompt == engine.call(lambda s: s.templated(req)[1], timeout=30)
    assert prompt.endswith("<|im_start|>assistant\n") and "Name three colours." in prompt  # SmolLM2's ChatML
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)
    chat = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=12, temperature=0)  # type: ignore[arg-type]
    raw = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=12, temperature=0)
    assert raw.choices[0].text == chat.choices[0].message.content and raw.choices[0].text
    assert raw.usage is not None and chat.usage is not None and raw.usage.prompt_tokens == chat.usage.prompt_tokens


def test_tools_and_template_variables_are_rendered_and_bad_bodies_refused(http: httpx.Client) -> None:
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    with_tools = http.post("/apply-template", json={"messages": MESSAGES, "tools": [tool]}).json()["prompt"]
    assert "get_weather" in with_tools
    for body, param in (
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
        ({}, "messages"),
    ):
        r = http.post("/apply-template", json=body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    page = http.post("/apply-template", content=b'{"messages": []}', headers={"Content-Type": "text/plain"})
    assert page.status_code == 415  # what a web page may post without a CORS preflight
    assert http.get("/health").status_code == 200


def test_apply_template_needs_the_api_key_when_one_is_set(engine: Engine) -> None:
    with EndpointServer(engine, MODEL_ID, port=0, api_key="s3cret") as srv:
        body = {"messages": MESSAGES}
        assert httpx.post(f"{srv.url}/apply-template", json=body).status_code == 401
        ok = httpx.post(f"{srv.url}/apply-template", json=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["prompt"].endswith("<|im_start|>assistant\n")
