"""Fill-in-the-middle on a real `dynadraft serve` of Qwen2.5-Coder: /v1/completions' `suffix` (OpenAI's and
Ollama's field) framed by the model's FIM tokens, as llama-server's /infill frames it; the same prompt written out
with the FIM tokens as text (what editor plugins send) completes the same; a model without them is told so."""

from __future__ import annotations

from pathlib import Path

import httpx

from app.engine.infill import infill_tokens
from app.engine.types import Infill
from app.runtime.llama import Model, ModelParams
from tests.server.helpers import dynadraft_serve

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n\n\nprint(add(1, 2))\n"


def test_suffix_fills_the_middle_as_the_written_out_fim_prompt_does(qwen_pair: tuple[Path, Path]) -> None:
    _, coder = qwen_pair  # the 0.5B: <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>
    model = Model(str(coder), ModelParams())
    try:
        want = infill_tokens(model.vocab, Infill(PREFIX, SUFFIX), 4096)
        at_end = infill_tokens(model.vocab, Infill(PREFIX, ""), 4096)
        repo = infill_tokens(
            model.vocab, Infill(PREFIX, SUFFIX, (("util.py", "def sub(a, b):\n    return a - b\n"),)), 4096
        )
        assert model.vocab.fim is not None
        pre, suf, mid = model.vocab.fim.pre, model.vocab.fim.suf, model.vocab.fim.mid
    finally:
        model.close()
    assert want[0] == pre and want[-1] == mid and suf in want
    with dynadraft_serve("--model", str(coder), "--ctx-size", "4096") as (client, name, base):  # room for files
        fim = client.completions.create(model=name, prompt=PREFIX, suffix=SUFFIX, max_tokens=8, temperature=0)
        assert fim.choices[0].text.startswith("a + b")
        assert fim.usage is not None and fim.usage.prompt_tokens == len(want)
        written = "<|fim_prefix|>" + PREFIX + "<|fim_suffix|>" + SUFFIX + "<|fim_middle|>"
        same = client.completions.create(model=name, prompt=written, max_tokens=8, temperature=0)
        assert same.choices[0].text == fim.choices[0].text
        assert same.usage is not None and same.usage.prompt_tokens == len(want)
        # an empty suffix is still fill-in-the-middle (at the end of the file)
        end = client.completions.create(model=name, prompt=PREFIX, suffix="", max_tokens=4, temperature=0)
        assert end.usage is not None and end.usage.prompt_tokens == len(at_end) < len(want)
        # llama-server's /infill (what llama.vscode sends): the same prompt without other files, and the
        # repository-level one with them
        infill = {"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 8, "temperature": 0}
        root = base.removesuffix("/v1")
        same_infill = httpx.post(f"{root}/infill", json=infill, timeout=120).json()
        assert same_infill["content"] == fim.choices[0].text and same_infill["tokens_evaluated"] == len(want)
        files = [{"filename": "util.py", "text": "def sub(a, b):\n    return a - b\n"}]
        with_files = httpx.post(f"{root}/infill", json={**infill, "input_extra": files}, timeout=120).json()
        assert with_files["tokens_evaluated"] == len(repo) and with_files["content"].startswith("a + b")


def test_a_model_without_fim_tokens_is_told_so(smollm2_path: Path) -> None:
    with dynadraft_serve("--model", str(smollm2_path)) as (_, name, base):
        body = {"model": name, "prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 4}
        r = httpx.post(f"{base}/completions", json=body, timeout=60)
        assert r.status_code == 400, r.text
        assert "no fill-in-the-middle tokens" in r.json()["error"]["message"]
        assert httpx.get(f"{base.removesuffix('/v1')}/health").status_code == 200
