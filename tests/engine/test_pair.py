"""The real speculative pair: Qwen2.5-Coder 1.5B target with its 0.5B draft (same tokenizer)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.runtime.sampling import SamplingParams
from app.speculative.exactness import compare
from app.speculative.settings import PLAIN, SpecSettings

pytestmark = pytest.mark.pair

PROMPT = "Write a Python function that parses a CSV line into fields, handling quoted fields. Code only."


@pytest.fixture(scope="module")
def pair_session(qwen_pair: tuple[Path, Path]) -> Iterator[Session]:
    target, draft = qwen_pair
    s = Session(EngineConfig(model=str(target), draft=str(draft), n_ctx=1024, n_batch=256))
    yield s
    s.close()


def _run(s: Session, spec: SpecSettings, **kw) -> GenerationSummary:
    req = GenerationRequest(
        messages=({"role": "user", "content": PROMPT},),
        max_tokens=48,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
        **kw,
    )
    return [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary


@pytest.fixture(scope="module")
def plain(pair_session: Session) -> GenerationSummary:
    """Plain greedy decoding of the prompt with its margins, decoded once for every setting compared with it."""
    return _run(pair_session, PLAIN, collect_margins=True)


def test_pair_is_accepted_and_a_mismatched_pair_is_refused(pair_session: Session, smollm2_path: Path) -> None:
    from app.speculative.sources import IncompatibleDraft, check_pair

    assert "draft" in pair_session.sources
    from app.runtime.llama import Model

    small = Model(smollm2_path)
    try:
        with pytest.raises(IncompatibleDraft, match="differ"):
            check_pair(pair_session.model, small)
    finally:
        small.close()


@pytest.mark.parametrize(
    "spec",
    # Depth 2 and the other settings run on the SmolLM2 pair in test_session.py at a tenth of the cost.
    [SpecSettings("draft", 4, p_min=0.5), SpecSettings("draft", 8)],
    ids=lambda s: s.label(),
)
def test_greedy_exactness_with_the_real_pair(
    pair_session: Session, plain: GenerationSummary, spec: SpecSettings
) -> None:
    out = _run(pair_session, spec)
    verdict = compare(plain.tokens, plain.margins, out.tokens)
    assert verdict.acceptable, verdict.describe()
    t = out.timings
    assert t.draft_n > 0 and t.draft_n_accepted > 0
    # Code is predictable for the 0.5B: well over one token per target verify on average.
    assert out.timings.predicted_n / out.steps > 1.5
    assert out.per_source["draft"]["accepted"] == t.draft_n_accepted


def test_generate_cli_json_with_the_pair(qwen_pair: tuple[Path, Path]) -> None:
    target, draft = qwen_pair
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "generate",
            "--model",
            str(target),
            "--draft",
            str(draft),
            "--spec-n-max",
            "4",
            "--spec-p-min",
            "0.25",
            "--prompt",
            "Say hi in five words.",
            "--max-tokens",
            "12",
            "--temperature",
            "0",
            "--json",
            "--ctx-size",
            "512",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert set(out) >= {"text", "tokens", "finish_reason", "timings", "steps", "dynamic_draft"}
    assert out["dynamic_draft"]["reason"] == "override"
    assert out["timings"]["draft_n"] >= out["timings"]["draft_n_accepted"] >= 0
    assert out["speculative"]["n_max"] == 4 and out["speculative"]["p_min"] == 0.25
