"""logit_bias as OpenAI and llama-server take it (ids, text keys, false), under speculation too; max_tokens -1."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.server.helpers import MODEL_ID

PROMPT = "The sea is"
# A raw prompt SmolLM2 goes on copying, so prompt lookup drafts (and the verify step has to honour the bias).
COPY = "apple, pear, plum, fig, apple, pear, plum, fig, apple, pear, plum, fig, apple,"


@pytest.fixture(scope="module")
def client(base_url: str) -> Any:
    c = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=60)
    yield c
    c.close()


def native(http: httpx.Client, **body: Any) -> dict[str, Any]:
    """llama-server's /completion, greedy and without the prompt cache (same logits whatever ran before), ids back."""
    body = {"prompt": PROMPT, "n_predict": 16, "temperature": 0, "cache_prompt": False, "return_tokens": True} | body
    r = http.post("/completion", json=body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_banned_token_never_appears_and_every_form_of_the_ban_agrees(client: Any, http: httpx.Client) -> None:
    plain = native(http)
    first = plain["tokens"][0]
    ids = native(http, logit_bias=[[first, False]])  # llama-server's list form; false bans
    assert first not in ids["tokens"] and ids["content"] != plain["content"]
    # The same ban as OpenAI's object (ids as text, -100) and as llama-server's text key (the token's own text).
    text_key = http.post("/tokenize", json={"content": " a"}).json()["tokens"]
    assert text_key == [first]  # SmolLM2 continues "The sea is" with " a"
    assert native(http, logit_bias={str(first): -100})["content"] == ids["content"]
    assert native(http, logit_bias=[[" a", False]])["content"] == ids["content"]
    # Through the openai client, on the legacy completions route: the same text.
    resp = client.completions.create(
        model=MODEL_ID,
        prompt=PROMPT,
        max_tokens=16,
        temperature=0,
        logit_bias={str(first): -100},
        extra_body={"cache_prompt": False},
    )
    assert resp.choices[0].text == ids["content"]


def test_a_large_bias_chooses_the_token_even_when_sampling(client: Any, http: httpx.Client) -> None:
    comma = http.post("/tokenize", json={"content": ","}).json()["tokens"]
    assert len(comma) == 1
    resp = client.chat.completions.create(
        model=MODEL_ID,
        messages=[{"role": "user", "content": "Name a colour."}],
        max_tokens=5,
        temperature=1.0,
        seed=3,
        logit_bias={str(comma[0]): 100},
    )
    assert resp.choices[0].message.content == "," * 5


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_prompt_lookup_drafts_are_verified_against_the_biased_logits(http: httpx.Client, temperature: float) -> None:
    """Prompt lookup proposes what followed in the prompt (" fig" after " plum,"), banned or not: the verify step
    must refuse a banned token, or it would reach the reply. A sampled reply reaches " plum," (so lookup had " fig"
    to propose) only for some seeds, and which ones moves with the dependencies' versions: every seed tried must keep
    the ban, and at least one must have reached " plum,"."""
    banned = http.post("/tokenize", json={"content": " fig"}).json()["tokens"]
    assert len(banned) == 1
    reached = 0
    for seed in (5, 1, 2, 3) if temperature else (5,):
        base = {
            "prompt": COPY,
            "n_predict": 40,
            "temperature": temperature,
            "seed": seed,
            "speculative": {"source": "lookup"},
        }
        if temperature == 0.0:
            assert banned[0] in native(http, **base)["tokens"]  # unbiased, the reply copies " fig"
        out = native(http, **base, logit_bias=[[banned[0], False]])
        assert out["timings"]["draft_n"] > 0 and banned[0] not in out["tokens"]
        reached += " plum," in out["content"]
        if temperature == 0.0:  # greedy: every drafted token the target would pick is accepted; the " fig"s were not
            assert out["timings"]["draft_n_accepted"] < out["timings"]["draft_n"]
    assert reached, "no reply reached ' plum,': lookup never had ' fig' to propose"


@pytest.mark.parametrize(
    ("bias", "says"),
    [
        ({"49152": 1}, "token 49152 is not in the vocabulary (0..49151)"),  # SmolLM2's vocabulary has 49152 tokens
        ({"-3": 1}, "token ids are 0 or more, got -3"),
        ([[7, True]], "a bias is a number, or false to ban the token"),
        ({"": 1}, "a text key has 1 to 256 characters"),
        ({str(i): 1 for i in range(1025)}, "at most 1024 entries, got 1025"),
        ([[7, "x"]], None),
    ],
)
def test_a_bad_logit_bias_is_a_400_naming_it(http: httpx.Client, bias: Any, says: str | None) -> None:
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "logit_bias": bias}
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"].startswith("logit_bias")
    if says is not None:
        assert says in error["message"]


def test_a_nan_bias_is_refused(http: httpx.Client) -> None:
    body = '{"prompt": "Hi", "n_predict": 2, "logit_bias": [[7, NaN]]}'
    r = http.post("/completion", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["param"].startswith("logit_bias")


def test_max_tokens_minus_one_means_no_limit_as_in_llama_server_and_lm_studio(client: Any, http: httpx.Client) -> None:
    resp = client.chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": "Say hello."}], max_tokens=-1, temperature=0
    )
    assert resp.choices[0].finish_reason == "stop" and resp.usage.completion_tokens > 0
    r = http.post(
        "/v1/chat/completions",
        json={"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": -2},
    )
    assert r.status_code == 400 and "or -1 for no limit" in r.json()["error"]["message"]
    # Anthropic's API has no such value: its route keeps max_tokens >= 1.
    r = http.post(
        "/v1/messages", json={"model": MODEL_ID, "max_tokens": -1, "messages": [{"role": "user", "content": "Hi"}]}
    )
    assert r.status_code == 400 and r.json()["error"]["message"]
