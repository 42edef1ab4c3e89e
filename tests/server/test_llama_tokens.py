"""llama-server's /tokenize and /detokenize on the real endpoint: the engine's own tokens, pieces as llama-server
writes them, bad ids refused before they reach llama.cpp, and answers that do not wait for a running generation."""

from __future__ import annotations

import httpx
import openai
import pytest

from app.engine.types import GenerationRequest
from app.engine.worker import Engine
from app.server.runner import EndpointServer
from tests.server.helpers import MODEL_ID

TEXT = "Hello, llamas: naïve café, 🦙 and <|im_start|> too."


def test_tokenize_gives_the_engines_own_tokens_and_detokenize_inverts_it(http: httpx.Client, engine: Engine) -> None:
    r = http.post("/tokenize", json={"content": TEXT})
    assert r.status_code == 200, r.text
    ids = r.json()["tokens"]
    assert ids == engine.tokenizer.tokenize(TEXT, False, True) and all(isinstance(t, int) for t in ids)
    # parse_special (llama-server's default: true) makes the control token one id; off, it is plain text
    im_start = engine.tokenizer.tokenize("<|im_start|>", False, True)
    assert len(im_start) == 1 and im_start[0] in ids
    literal = http.post("/tokenize", json={"content": TEXT, "parse_special": False}).json()["tokens"]
    assert im_start[0] not in literal and len(literal) > len(ids)
    assert http.post("/detokenize", json={"tokens": ids}).json() == {"content": TEXT}
    # the count a client gets is the count a raw completion of that text is charged (its special tokens parsed, as
    # llama-server's completions parse them)
    req = GenerationRequest(prompt=TEXT, max_tokens=1)
    counted = http.post("/tokenize", json={"content": TEXT, "add_special": True}).json()["tokens"]
    assert counted == engine.call(lambda s: s.format_prompt(req), timeout=30) and im_start[0] in counted
    assert http.post("/tokenize", json={}).json() == {"tokens": []}  # as llama-server: no content, no tokens
    assert http.post("/detokenize", json={}).json() == {"content": ""}


def test_with_pieces_writes_text_or_bytes_as_llama_server_does(http: httpx.Client) -> None:
    out = http.post("/tokenize", json={"content": TEXT, "with_pieces": True}).json()["tokens"]
    assert all(set(p) == {"id", "piece"} for p in out)
    raw = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in out)
    assert raw.decode("utf-8") == TEXT
    # SmolLM2's byte-level tokens split the llama emoji: those pieces are not UTF-8 alone, so they come as bytes
    assert any(isinstance(p["piece"], list) for p in out)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tokens": [1, -1]}, "tokens.1"),
        ({"tokens": [49152]}, "tokens.0"),  # SmolLM2's vocabulary is ids 0..49151
        ({"tokens": [2**40]}, "tokens.0"),
        ({"tokens": ["1"]}, "tokens.0"),
        ({"tokens": [1.0]}, "tokens.0"),
        ({"tokens": 1}, "tokens"),
    ],
)
def test_ids_outside_the_vocabulary_are_refused_and_lose_nothing(
    http: httpx.Client, engine: Engine, body: dict[str, object], param: str
) -> None:
    assert engine.model_meta.n_vocab == 49152
    r = http.post("/detokenize", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
    assert http.post("/tokenize", json={"content": 5}).status_code == 400
    assert http.get("/health").status_code == 200  # llama.cpp was never handed the id


def test_a_token_id_prompt_completes_as_its_text_does(base_url: str, http: httpx.Client) -> None:
    """Token ids as /v1/completions' prompt (OpenAI's, llama-server's and vLLM's form): used as they are, so the
    ids of the text (with its special prefix, as a text prompt gets) give the same completion and the same count."""
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)
    text = "The capital of France is"
    ids = http.post("/tokenize", json={"content": text, "add_special": True}).json()["tokens"]
    by_text = client.completions.create(model=MODEL_ID, prompt=text, max_tokens=8, temperature=0)
    for prompt in (ids, [ids]):  # a list of ids, or a batch of one
        by_ids = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=8, temperature=0)
        assert by_ids.choices[0].text == by_text.choices[0].text and by_ids.choices[0].text
        assert by_ids.usage is not None and by_text.usage is not None
        assert by_ids.usage.prompt_tokens == len(ids) == by_text.usage.prompt_tokens
    # an id outside the vocabulary is refused, naming where it is, before llama.cpp sees it
    r = http.post("/v1/completions", json={"model": MODEL_ID, "prompt": [*ids, 49152], "max_tokens": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == f"prompt.{len(ids)}", r.text
    assert http.get("/health").status_code == 200


def test_tokenize_answers_while_a_generation_runs(base_url: str, engine: Engine) -> None:
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model=MODEL_ID,
        messages=[{"role": "user", "content": "Count from one to two hundred in words."}],
        max_tokens=400,
        temperature=0,
        stream=True,
    )
    try:
        next(iter(stream))  # the generation has started on the engine thread
        assert engine.queue_depth >= 1
        r = httpx.post(f"{base_url}/tokenize", json={"content": TEXT}, timeout=30)
        # answered from the tokenizer while the generation still runs (its stream is unread and unfinished)
        assert r.status_code == 200 and engine.queue_depth >= 1
    finally:
        stream.close()


def test_token_routes_need_the_api_key_when_one_is_set(engine: Engine) -> None:
    with EndpointServer(engine, MODEL_ID, port=0, api_key="s3cret") as srv:
        assert httpx.post(f"{srv.url}/tokenize", json={"content": "hi"}).status_code == 401
        assert httpx.post(f"{srv.url}/detokenize", json={"tokens": [1]}).status_code == 401
        ok = httpx.post(f"{srv.url}/tokenize", json={"content": "hi"}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["tokens"]
