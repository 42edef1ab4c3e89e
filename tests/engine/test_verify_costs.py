"""A restarted engine starts from the verify costs it measured last time (the source memory file), through a real
Session on a real model, and through two `dynadraft generate` runs: a one-shot CLI run is always a first request."""

from __future__ import annotations

import json
from pathlib import Path

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.policy.source_memory import MEMORY_FILE
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN, SpecSettings

CODE = "\n".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(6))
COPY = ({"role": "user", "content": f"Repeat this code exactly:\n\n```python\n{CODE}```"},)
COST_STOP = SpecSettings("lookup", 8, cost_stop=True)


def _run(s: Session, spec: SpecSettings) -> GenerationSummary:
    req = GenerationRequest(messages=COPY, max_tokens=48, sampling=SamplingParams(temperature=0.0), speculative=spec)
    return [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary


def _saved(home: Path) -> dict[str, dict[str, float]]:
    (path,) = (home / "calibration").glob(f"*/{MEMORY_FILE}")
    return json.loads(path.read_text())["verify_ms"]


def test_a_restarted_session_starts_from_the_verify_costs_it_measured(smollm2_path: Path, _isolated_home: Path) -> None:
    cfg = EngineConfig(model=str(smollm2_path), n_ctx=1024)
    first = Session(cfg)
    try:
        assert _run(first, COST_STOP).timings.draft_n > 0  # the copy task drafts: verify sizes above 1 measured
        measured = dict(first._verify_ms)
    finally:
        first.close()
    assert len(measured) >= 2
    ((ident, table),) = _saved(_isolated_home).items()
    assert "@cpu:" in ident and "|fa=" in ident  # the target on this device, with the settings that change ms
    assert {int(b) for b in table} == set(measured)

    second = Session(cfg)
    try:
        _run(second, PLAIN)  # a plain request learns no verify costs, and reads none
        assert second._verify_ms == {}
        summary = _run(second, COST_STOP)
        assert summary.source_memory == {"verify_costs_from_memory": len(measured)}
        assert set(measured) <= set(second._verify_ms)  # every remembered size, re-measured or as remembered
        assert _run(second, COST_STOP).source_memory is None  # said once: the session's table is now its own
    finally:
        second.close()


def test_source_memory_off_keeps_no_verify_costs(smollm2_path: Path, _isolated_home: Path) -> None:
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=1024, source_memory=False))
    try:
        _run(s, COST_STOP)
    finally:
        s.close()
    assert not list((_isolated_home / "calibration").glob(f"*/{MEMORY_FILE}"))


def test_dynadraft_generate_twice_the_second_run_starts_from_the_first_runs_costs(smollm2_path: Path) -> None:
    from tests.journeys.helpers import THREADS, generate_json

    args = ("--model", str(smollm2_path), "--ctx-size", "1024", *THREADS, "--lookup", "--cost-stop")
    args += ("--max-tokens", "32", "--temperature", "0", "--prompt", COPY[0]["content"])
    first, _ = generate_json(*args)
    second, _ = generate_json(*args)
    assert first["speculative"]["cost_stop"] and first["timings"]["draft_n"] > 0
    assert "verify_costs_from_memory" not in (first["source_memory"] or {})
    assert second["source_memory"]["verify_costs_from_memory"] >= 2
