"""llama.cpp's further samplers over HTTP (DRY, XTC, typical, top-n-sigma, dynamic temperature), under speculation
too: each checked by a property of the reply the sampler guarantees, not by the implementation's own maths."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.journeys.helpers import THREADS, dynadraft, served
from tests.server.helpers import MODEL_ID

# A raw prompt SmolLM2 goes on copying: greedy, it repeats the list; prompt lookup drafts the repeats.
COPY = "apple, pear, plum, fig, apple, pear, plum, fig, apple, pear, plum, fig, apple,"
LOOKUP = {"source": "lookup", "n_max": 8}


def native(http: httpx.Client, **body: Any) -> dict[str, Any]:
    """llama-server's /completion without the prompt cache (same logits whatever ran before), ids back."""
    body = {"prompt": COPY, "n_predict": 24, "cache_prompt": False, "return_tokens": True, "seed": 11} | body
    r = http.post("/completion", json=body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def tokens_of(http: httpx.Client, text: str) -> list[int]:
    return [int(t) for t in http.post("/tokenize", json={"content": text}).json()["tokens"]]


def repeated_trigrams(history: list[int], start: int) -> list[int]:
    """Positions j >= start whose trigram (history[j-2..j]) occurred earlier in history."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for j in range(2, len(history)):
        tri = tuple(history[j - 2 : j + 1])
        if j >= start and tri in seen:
            out.append(j)
        seen.add(tri)
    return out


@pytest.mark.parametrize("speculative", [None, LOOKUP], ids=["plain", "lookup"])
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_dry_stops_the_reply_extending_any_repeat(http: httpx.Client, speculative: Any, temperature: float) -> None:
    """DRY with allowed length 2, no breakers and a penalty far above the logits' spread: no emitted token may make a
    trigram that already occurred (it would extend a repeat of 2), whatever prompt lookup drafts."""
    prompt = tokens_of(http, COPY)
    extra = {"speculative": speculative} if speculative else {}
    plain = native(http, temperature=temperature, **extra)
    assert repeated_trigrams(prompt + plain["tokens"], len(prompt))  # without DRY the reply copies the list
    dry = {"dry_multiplier": 50, "dry_allowed_length": 2, "dry_penalty_last_n": 256, "dry_sequence_breakers": []}
    out = native(http, temperature=temperature, **dry, **extra)
    assert len(out["tokens"]) == 24 and repeated_trigrams(prompt + out["tokens"], len(prompt)) == []
    if speculative:  # lookup drafted the repeats DRY forbids, and the verify step refused them
        assert out["timings"]["draft_n"] > out["timings"]["draft_n_accepted"]


def test_samplers_through_the_openai_client(base_url: str) -> None:
    """The fields as a client sends them (extra_body). Completions: DRY with its default breakers (none in the
    list) stops the copying; a dry_base below 1 is llama-server's default, as llama-server reads it. Chat: XTC's
    second choice, each token the second of its top_logprobs."""
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=60)
    ask = {"model": MODEL_ID, "prompt": COPY, "max_tokens": 24, "temperature": 0}
    plain = client.completions.create(**ask, extra_body={"cache_prompt": False}).choices[0].text
    dry = client.completions.create(**ask, extra_body={"cache_prompt": False, "dry_multiplier": 2.0, "dry_base": 0})
    assert plain.count(" pear,") >= 2 and dry.choices[0].text.count(" pear,") < plain.count(" pear,")
    xtc = {"top_k": 2, "xtc_probability": 1.0, "xtc_threshold": 0.0}
    chat = client.chat.completions.create(
        model=MODEL_ID,
        messages=[{"role": "user", "content": "Name three fruits."}],
        max_tokens=12,
        temperature=1.0,
        logprobs=True,
        top_logprobs=2,
        extra_body=xtc,
    )
    client.close()
    content = chat.choices[0].logprobs.content
    assert len(content) == 12 and all(t.token == t.top_logprobs[1].token for t in content)


@pytest.mark.parametrize("speculative", [None, LOOKUP], ids=["plain", "lookup"])
def test_xtc_at_threshold_0_with_top_k_2_always_takes_the_second_choice(http: httpx.Client, speculative: Any) -> None:
    """XTC removes every token at or above its threshold but the least likely of them: with threshold 0, top_k 2
    and probability 1 that leaves the second most likely token, at every step (a sampler, yet deterministic)."""
    body = {"temperature": 1.0, "top_k": 2, "xtc_probability": 1.0, "xtc_threshold": 0.0, "n_probs": 2}
    out = native(http, **body, **({"speculative": speculative} if speculative else {}))
    probs = out["completion_probabilities"]
    assert len(probs) == 24
    assert all(p["id"] == p["top_logprobs"][1]["id"] for p in probs)


def test_typical_p_0_keeps_the_most_typical_token(http: httpx.Client) -> None:
    """Locally typical sampling keeps tokens by how near their surprise is to the entropy: at typical_p 0 only the
    nearest stays, so with top_k 5 each token is the one of the top 5 whose -log p is nearest their entropy."""
    out = native(http, prompt="My favourite colour is", temperature=1.0, top_k=5, typical_p=0.0, n_probs=5)
    for p in out["completion_probabilities"]:
        logps = [t["logprob"] for t in p["top_logprobs"]]
        z = math.log(sum(math.exp(x) for x in logps))
        q = [x - z for x in logps]  # log-probabilities renormalised over the top 5
        entropy = -sum(math.exp(x) * x for x in q)
        nearest = min(range(5), key=lambda i: abs(-q[i] - entropy))
        assert p["id"] == p["top_logprobs"][nearest]["id"]


def test_a_tiny_top_n_sigma_is_greedy_even_at_temperature_1(http: httpx.Client) -> None:
    greedy = native(http, prompt="The sea is", temperature=0)
    sigma = native(http, prompt="The sea is", temperature=1.0, top_n_sigma=1e-6, seed=3)
    assert sigma["tokens"] == greedy["tokens"]


def test_dynamic_temperature_around_0_samples(http: httpx.Client) -> None:
    """temperature 0 with a dynatemp_range is not greedy (llama.cpp's temp_ext samples in [0, range]): some seed
    gives another reply than the greedy one, and one seed gives one reply."""
    greedy = native(http, prompt="Once upon a time", temperature=0)["content"]
    body = {"prompt": "Once upon a time", "temperature": 0, "dynatemp_range": 1.5}
    replies = {native(http, **body, seed=s)["content"] for s in range(4)}
    assert replies - {greedy}
    assert native(http, **body, seed=2)["content"] == native(http, **body, seed=2)["content"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("typical_p", 1.5),
        ("xtc_probability", -0.1),
        ("xtc_threshold", 2),
        ("dynatemp_range", -1),
        ("dry_multiplier", -1),
        ("dry_allowed_length", -2),
        ("dry_penalty_last_n", -5),
        ("dry_sequence_breakers", [""]),
        ("dry_sequence_breakers", ["x" * 41]),
        ("top_n_sigma", "wide"),
    ],
)
@pytest.mark.parametrize("route", ["/v1/chat/completions", "/completion"])
def test_a_bad_sampler_value_is_a_400_naming_it(http: httpx.Client, route: str, field: str, value: Any) -> None:
    body: dict[str, Any] = {"model": MODEL_ID, "max_tokens": 2, field: value}
    body |= {"messages": [{"role": "user", "content": "Hi"}]} if route.startswith("/v1") else {"prompt": "Hi"}
    r = http.post(route, json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"].startswith(field)


@pytest.mark.parametrize("speculative", [None, LOOKUP], ids=["plain", "lookup"])
def test_mirostat_2_with_tau_0_is_greedy_and_with_tau_5_samples(http: httpx.Client, speculative: Any) -> None:
    """Mirostat 2 keeps the tokens whose surprise is at most mu, which starts at 2 tau: at tau 0 only the likeliest,
    and mu stays 0, so the reply is the greedy one at temperature 1. At tau 5 it samples: a seed repeats its reply,
    and some seed gives another than greedy."""
    extra = {"speculative": speculative} if speculative else {}
    greedy = native(http, temperature=0, **extra)["tokens"]
    assert native(http, temperature=1.0, mirostat=2, mirostat_tau=0, **extra)["tokens"] == greedy
    body = {"prompt": "Once upon a time", "temperature": 1.0, "mirostat": 2, "mirostat_tau": 5.0, **extra}
    replies = [native(http, **body, seed=s)["tokens"] for s in (1, 2, 3, 1)]
    assert replies[0] == replies[3]
    assert any(r != native(http, prompt="Once upon a time", temperature=0)["tokens"] for r in replies)


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/completions", "/completion"])
@pytest.mark.parametrize(("field", "value", "neutral"), [("adaptive_target", 0.5, -1.0)])
def test_llama_server_samplers_it_lacks_are_refused_unless_neutral(
    http: httpx.Client, route: str, field: str, value: Any, neutral: Any
) -> None:
    body: dict[str, Any] = {"model": MODEL_ID, "max_tokens": 2}
    body |= {"messages": [{"role": "user", "content": "Hi"}]} if "chat" in route else {"prompt": "Hi"}
    r = http.post(route, json=body | {field: value})
    assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text
    assert http.post(route, json=body | {field: neutral}).status_code == 200


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/completions", "/completion"])
def test_min_keep_keeps_candidates_min_p_would_drop(http: httpx.Client, route: str) -> None:
    """min_p 1 keeps only the likeliest token, so a hot temperature still gives the greedy reply; with min_keep 20
    the 20 likeliest stay, and some seed samples another reply. A negative min_keep is a 400 naming it."""
    body: dict[str, Any] = {"model": MODEL_ID, "max_tokens": 8, "temperature": 2.0, "min_p": 1.0}
    body |= {"messages": [{"role": "user", "content": "Tell me a story"}]} if "chat" in route else {"prompt": "Once"}

    def text(**extra: Any) -> str:
        r = http.post(route, json=body | extra)
        assert r.status_code == 200, r.text
        data = r.json()
        if route == "/completion":
            return str(data["content"])
        choice = data["choices"][0]
        return str(choice["message"]["content"] if "chat" in route else choice["text"])

    greedy = text(temperature=0)
    assert {text(seed=s) for s in (1, 2, 3)} == {greedy}
    assert any(text(seed=s, min_keep=20) != greedy for s in (1, 2, 3))
    r = http.post(route, json=body | {"min_keep": -1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "min_keep", r.text


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/completions", "/completion"])
def test_mirostat_on_every_route_and_a_bad_version_is_a_400(http: httpx.Client, route: str) -> None:
    body: dict[str, Any] = {"model": MODEL_ID, "max_tokens": 2, "temperature": 1.0, "seed": 1}
    body |= {"messages": [{"role": "user", "content": "Hi"}]} if "chat" in route else {"prompt": "Hi"}
    assert http.post(route, json=body | {"mirostat": 1}).status_code == 200
    r = http.post(route, json=body | {"mirostat": 3})
    assert r.status_code == 400 and r.json()["error"]["param"] == "mirostat"
    # With a grammar (a JSON schema) it is refused, never run without one of them.
    r = http.post(route, json=body | {"mirostat": 2, "json_schema": {"type": "object"}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "mirostat", r.text


def test_serves_sampler_flags_are_the_defaults_of_requests_that_leave_them_out(smollm2_path: Path) -> None:
    """As llama-server's command line: `serve --temperature 0 --dry-multiplier 50 ...` applies to a request that sets
    neither, a request's own field wins, /props reports them, and a bad flag stops the start naming its field."""
    flags = ("--temperature", "0", "--dry-multiplier", "50", "--dry-penalty-last-n", "256")
    with served("--model", str(smollm2_path), *THREADS, *flags, "--dry-sequence-breaker", "none") as (url, _):
        root = url.removesuffix("/v1")
        with httpx.Client(base_url=root, timeout=120) as h:
            prompt = tokens_of(h, COPY)
            body = {"prompt": COPY, "n_predict": 24, "cache_prompt": False, "return_tokens": True}
            dry = h.post("/completion", json=body).json()
            assert repeated_trigrams(prompt + dry["tokens"], len(prompt)) == []  # the server's DRY, greedy
            own = h.post("/completion", json=body | {"dry_multiplier": 0}).json()
            assert repeated_trigrams(prompt + own["tokens"], len(prompt))  # the request's own value wins: it copies
            params = h.get("/props").json()["default_generation_settings"]["params"]
            assert (
                params["temperature"] == 0 and params["dry_multiplier"] == 50 and params["dry_sequence_breakers"] == []
            )
            assert params["top_k"] == 0 and params["mirostat"] == 0  # untouched: the sampler's neutral values
    p = dynadraft("serve", "--model", str(smollm2_path), "--typical", "5")
    assert p.returncode == 2 and "typical_p" in p.stderr and "Traceback" not in p.stderr
