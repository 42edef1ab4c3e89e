"""J6: a target and draft whose vocabulary sizes differ, served by `dynadraft serve`, sampled at T = 0.8 over HTTP."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from tests.engine.tiny_gguf import write_tiny_llama
from tests.journeys.helpers import THREADS, served


@pytest.mark.parametrize("larger", ["target", "draft"])
def test_mismatched_vocab_pair_samples_over_http(tmp_path: Path, larger: str) -> None:
    big, small = (40, 0) if larger == "target" else (0, 40)
    target = write_tiny_llama(tmp_path / "target.gguf", seed=1, extra_tokens=big, out_std=0.3)
    draft = write_tiny_llama(tmp_path / "draft.gguf", seed=2, extra_tokens=small, out_std=0.3)
    with served("--model", str(target), "--draft", str(draft), "--ctx-size", "512", *THREADS) as (url, log):
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        drafted = rejected = 0
        for seed in range(3):
            r = client.chat.completions.with_raw_response.create(
                model="target",
                messages=[{"role": "user", "content": "the cat sat on the mat"}],
                max_tokens=40,
                temperature=0.8,
                seed=seed,
                extra_body={"speculative": {"source": "draft", "n_max": 4}},
            )
            assert r.http_response.status_code == 200
            body = r.http_response.json()
            assert body["choices"][0]["finish_reason"] in ("length", "stop")
            t = body["timings"]
            drafted += t["draft_n"]
            rejected += t["draft_n"] - t["draft_n_accepted"]
        assert drafted > 0 and rejected > 0, log[-20:]  # the rejection path (where the mismatch crashed) ran
