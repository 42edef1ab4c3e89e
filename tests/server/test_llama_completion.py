"""llama-server's native /completion on the real endpoint: its field names and result object, the same text as
/v1/completions gives, its stream (no [DONE]), its flat speculative.* keys honoured, bad input refused."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.server.helpers import MODEL_ID

PROMPT = "The three primary colours are"


def test_completion_gives_the_openai_completions_text_in_llama_servers_result(http: httpx.Client) -> None:
    oai = http.post("/v1/completions", json={"model": MODEL_ID, "prompt": PROMPT, "max_tokens": 12, "temperature": 0})
    native = http.post("/completion", json={"prompt": PROMPT, "n_predict": 12, "temperature": 0, "return_tokens": True})
    assert oai.status_code == 200 and native.status_code == 200, native.text
    o, n = oai.json(), native.json()
    assert n["content"] == o["choices"][0]["text"] and n["content"]
    assert n["tokens_predicted"] == o["usage"]["completion_tokens"] == len(n["tokens"]) == 12
    assert n["tokens_evaluated"] == o["usage"]["prompt_tokens"] and n["stop_type"] == "limit" and n["stop"] is True
    assert n["model"] == MODEL_ID and n["prompt"] == PROMPT and n["tokens_cached"] == 12 + n["tokens_evaluated"]
    assert n["timings"]["predicted_n"] == 12 and n["dynamic_draft"]["reason"]
    # a stop string: "word", and which one; the alias /completions and max_tokens (which n_predict wins over) too
    first_word = n["content"].split()[0]
    body = {"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "stop": [first_word, "zzz"]}
    worded = http.post("/completions", json=body).json()
    assert worded["stop_type"] == "word" and worded["stopping_word"] == first_word
    assert first_word not in worded["content"]
    assert http.post("/completion", json={**body, "n_predict": 3, "stop": []}).json()["tokens_predicted"] == 3
    neutral = {"n_probs": 0, "mirostat": 0, "typical_p": 1.0, "ignore_eos": False, "n_keep": 4}  # what clients send
    assert http.post("/completion", json={**body, **neutral}).status_code == 200


def test_the_native_stream_ends_with_the_result_and_no_done_marker(http: httpx.Client) -> None:
    whole = http.post("/completion", json={"prompt": PROMPT, "n_predict": 10, "temperature": 0}).json()
    body = {"prompt": PROMPT, "n_predict": 10, "temperature": 0, "stream": True}
    with http.stream("POST", "/completion", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert all(line.startswith("data: {") for line in lines)  # llama-server's native stream: no [DONE]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    assert all(e["stop"] is False for e in events[:-1]) and events[-1]["stop"] is True
    assert "".join(e["content"] for e in events) == whole["content"]
    assert events[-1]["tokens_predicted"] == 10 and events[-1]["timings"]["predicted_n"] == 10


def test_n_probs_gives_llama_servers_completion_probabilities(http: httpx.Client) -> None:
    body = {"prompt": PROMPT, "n_predict": 6, "temperature": 0, "n_probs": 3, "return_tokens": True}
    out = http.post("/completion", json=body).json()
    probs = out["completion_probabilities"]
    assert [p["id"] for p in probs] == out["tokens"] and len(probs) == 6
    assert b"".join(bytes(p["bytes"]) for p in probs).decode() == out["content"]
    for p in probs:
        assert len(p["top_logprobs"]) == 3 and p["top_logprobs"][0]["id"] == p["id"]  # greedy: the likeliest
        assert p["logprob"] <= 0 and set(p["top_logprobs"][0]) == {"id", "token", "bytes", "logprob"}
    with http.stream("POST", "/completion", json={**body, "stream": True}) as r:
        events = [json.loads(line.removeprefix("data: ")) for line in r.iter_lines() if line]
    streamed = [p for e in events[:-1] for p in e.get("completion_probabilities", [])]
    assert [p["id"] for p in streamed] == out["tokens"]
    assert "completion_probabilities" not in http.post("/completion", json={**body, "n_probs": 0}).json()


def test_llama_servers_flat_speculative_keys_are_honoured(http: httpx.Client) -> None:
    # the pinned llama-server compiles these out and ignores them; here they run, and the record says so
    body = {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "speculative.n_max": 3, "speculative.p_min": 0.0}
    out = http.post("/completion", json=body).json()
    assert out["dynamic_draft"]["reason"] == "override"
    ran = out["generation_settings"]["speculative"]
    assert ran["n_max"] == 3 and ran["p_min"] == 0.0 and ran["source"] == "lookup"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": PROMPT, "n_predict": 0}, None),
        ({"prompt": [1, 49152]}, "prompt.1"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": PROMPT, "speculative.n_max": -1}, "speculative.n_max"),
        ({"prompt": PROMPT, "model": "gpt-4o"}, "model"),
        ({"prompt": PROMPT, "n_probs": 50}, "n_probs"),
        ({"prompt": PROMPT, "n_probs": 2, "post_sampling_probs": True}, "post_sampling_probs"),  # not ignored
        ({"prompt": PROMPT, "mirostat": 3}, "mirostat"),  # 1 and 2 run (tests/server/test_samplers.py)
        ({"prompt": PROMPT, "ignore_eos": True}, "ignore_eos"),
    ],
)
def test_bad_native_requests_are_refused(http: httpx.Client, body: dict[str, object], param: str | None) -> None:
    r = http.post("/completion", json=body)
    assert r.status_code in (400, 404), r.text
    assert r.json()["error"]["param"] == param
    assert http.get("/health").status_code == 200
