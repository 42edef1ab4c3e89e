"""The ROCmFPx journey on the real fork: a real Q4_0_ROCMFP4 file, run, calibrated and steered by the fork's server.

The fork's llama-server and llama-quantize come from scripts/build-fork-server.sh (DYNADRAFT_FORK_SERVER /
DYNADRAFT_FORK_QUANTIZE); the ROCmFPx file is SmolLM2-135M re-quantized by that quantizer at set-up (cached).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.external import ExternalSession
from app.engine.types import DoneEvent, GenerationRequest
from app.models.compat import check_loadable
from app.models.inspection import inspect_gguf
from app.policy.frontier import best_static
from app.policy.table import FrontierTable
from app.speculative.exactness import compare
from app.speculative.settings import PLAIN, SpecSettings

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = ({"role": "user", "content": "Name three colours of the rainbow."},)
# Small and fast on 2 cores: one 512-token context, one core per server (the test machine is shared).
RUN = ["--ctx-size", "1024", "--threads", "1"]


def _dd(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


@pytest.fixture(scope="module")
def draft() -> str:
    from app.models.packaged import ensure_quantized

    return str(ensure_quantized("smollm2-135m", "Q2_K"))


def _done(session: ExternalSession, request: GenerationRequest) -> DoneEvent:
    events = list(session.generate(request))
    assert isinstance(events[-1], DoneEvent)
    return events[-1]


def test_the_fork_writes_a_real_rocmfp4_file_and_inspection_names_it(smollm2_rocmfp4: Path) -> None:
    out = _dd("models", "--inspect", str(smollm2_rocmfp4), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    names = {q["name"]: q for q in report["quant_mix"]}
    assert names["Q4_0_ROCMFP4"]["type_id"] == 100 and names["Q4_0_ROCMFP4"]["fork"] == "ROCmFPx"
    assert report["file_type"] == 100 and report["format"] == "ROCmFP4"
    assert report["compatibility"]["status"] == "needs-fork" and not report["compatibility"]["loads"]


def test_generate_without_a_fork_runtime_refuses_with_the_inspect_answer(smollm2_rocmfp4: Path) -> None:
    model = str(smollm2_rocmfp4)
    answer = check_loadable(inspect_gguf(model)).message  # the same answer as `models --inspect`
    out = _dd("generate", "--model", model, "--prompt", "Hi", "--max-tokens", "4", "--temperature", "0", *RUN)
    assert out.returncode != 0 and answer in out.stderr, out.stderr


def test_cli_journey_generate_calibrate_serve_on_the_fork(
    smollm2_rocmfp4: Path, draft: str, fork_server_binary: str
) -> None:
    model = str(smollm2_rocmfp4)
    # On the fork's server it answers.
    gen = ["generate", "--model", model, "--server-binary", fork_server_binary, "--max-tokens", "12"]
    out = _dd(*gen, "--prompt", MESSAGES[0]["content"], "--temperature", "0", "--json", *RUN)
    assert out.returncode == 0, out.stderr
    answered = json.loads(out.stdout)
    assert answered["text"].strip() and answered["dynamic_draft"]["reason"] == "no_table"
    assert answered["dynamic_draft"]["runtime"]["kind"] == "llama-server"
    # Calibrate through the fork (short prompts and replies, an 18-second budget): the table names this binary in its
    # fingerprint.
    cal = ["calibrate", "--quick", "--model", model, "--draft", draft, "--server-binary", fork_server_binary]
    cal += ["--contexts", "64,160", "--gen-tokens", "16", "--budget-min", "0.3"]
    out = _dd(*cal, "--json", *RUN, timeout=600)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    table = result["table"]
    from app.engine.external_policy import binary_sha256

    assert f"sha256:{binary_sha256(fork_server_binary)}" in table["fingerprint"]["llama_build"]
    assert "@llama-server-" in result["saved_to"]  # this runtime's own store, apart from the bundled one's
    # Plain decoding is always measured first; how many draft settings fit the budget depends on the machine's load.
    assert any(r["setting"]["source"] == "none" and r["safe"] for r in table["rows"])
    assert "one server start per setting" in table["notes"]  # this build ignores per-request draft fields
    # serve on the fork reports DD's reason from that table, and says the setting is not applied per request.
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--model", model, "--draft", draft, "--server-binary"]
        + [fork_server_binary, "--port", "0", *RUN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
        assert match, line + (proc.stderr.read() if proc.stderr else "")
        from openai import OpenAI

        client = OpenAI(base_url=match.group(1), api_key="none")
        served = client.models.list().data[0].id
        reply = client.chat.completions.create(model=served, messages=list(MESSAGES), max_tokens=12, temperature=0)
        dd = (reply.model_extra or {})["dynamic_draft"]
        assert reply.choices[0].message.content
        assert dd["table_id"] == table["table_id"]
        assert dd["reason"] in ("table_row", "fallback_static", "fallback_plain", "fallback_held_out", "out_of_range")
        assert dd["applied_per_request"] is False and "lifetime" in dd["per_request_note"]
        # What runs is the table's best static setting, for every request of this server's lifetime.
        best = best_static(FrontierTable.from_dict(table))
        assert best is not None and SpecSettings.from_dict(dd["runtime"]["ran"]) == best.setting
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def lookup_session(smollm2_path: Path, fork_server_binary: str) -> Iterator[ExternalSession]:
    # The packaged Q4_1 (mainline types load in the fork too): its greedy continuation of a repeated list copies it,
    # which is what n-gram drafting needs (a run of one repeated token never drafts: ngram-simple copies only
    # after a match at least size-n tokens back).
    s = ExternalSession(EngineConfig(model=str(smollm2_path), n_ctx=1024, n_batch=256, n_threads=1,
                                     server_binary=fork_server_binary))  # fmt: skip
    yield s
    s.close()


def test_lookup_runs_as_the_forks_ngram_drafting(lookup_session: ExternalSession) -> None:
    prompt = "Repeat: " + "a b c d e f g h " * 3 + "a b c d"
    # No draft model: the server starts plain, the reference (with top-2 margins from the server's n_probs).
    plain = _done(
        lookup_session, GenerationRequest(prompt=prompt, max_tokens=24, speculative=PLAIN, collect_margins=True)
    ).summary
    assert len(plain.margins) == len(plain.tokens) and plain.timings.draft_n == 0
    # Asking for lookup is not refused: the server restarts with its n-gram drafting at the requested depth.
    lookup = SpecSettings("lookup", 8, 0, 0.0)
    s = _done(lookup_session, GenerationRequest(prompt=prompt, max_tokens=24, speculative=lookup)).summary
    first = lookup_session.server.logs(None).splitlines()[0]
    assert "--spec-type ngram-simple" in first and "--spec-ngram-simple-size-m 8" in first and " -md " not in first
    assert s.settings == lookup and s.timings.draft_n > 0
    dd = s.dynamic_draft
    assert dd is not None and dd["reason"] == "override" and dd["applied_per_request"] is False
    # Still plain-exact: greedy lookup gives what plain decoding gives (or departs at a near-tie only).
    assert compare(plain.tokens, plain.margins, s.tokens).acceptable


def test_pool_and_adaptive_stay_refused_with_a_reason(lookup_session: ExternalSession) -> None:
    from app.engine.types import InvalidRequest

    with pytest.raises(InvalidRequest, match="adaptive length needs the bundled runtime"):
        list(lookup_session.generate(GenerationRequest(prompt="Hi", max_tokens=2,
                                                       speculative=SpecSettings("lookup", 8, adaptive=True))))  # fmt: skip
    with pytest.raises(InvalidRequest, match="the cost stop needs the bundled runtime"):
        list(lookup_session.generate(GenerationRequest(prompt="Hi", max_tokens=2,
                                                       speculative=SpecSettings("lookup", 8, cost_stop=True))))  # fmt: skip


def test_build_script_names_both_cached_binaries(fork_server_binary: str) -> None:
    # The build script keys its cache on the source's content and the wheel's CPU flags: --path is instant.
    out = subprocess.run([str(ROOT / "scripts" / "build-fork-server.sh"), "--path"], capture_output=True, text=True)
    server, quantize = out.stdout.splitlines()
    assert out.returncode == 0 and Path(server).name == "llama-server" and Path(quantize).name == "llama-quantize"
    assert Path(server).parent == Path(quantize).parent and "rocmfpx-" in Path(server).parent.name
    assert os.path.isabs(server)


def test_the_catalogs_rocmfpx_builds_say_how_they_run() -> None:
    out = _dd("models", "--catalog", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    fork = [r for r in rows if r["runtime"] == "ROCmFPx"]
    assert fork and all("--server-binary" in r["runtime_hint"] and "Runtime" in r["runtime_hint"] for r in fork)
    assert all(r["runtime_hint"] == "runs on the bundled runtime" for r in rows if r["runtime"] == "bundled")
    text = _dd("models", "--catalog").stdout
    assert "build-fork-server.sh" in text


def test_the_external_grid_and_what_responses_say() -> None:
    from app.calibration.external import external_candidates
    from app.calibration.runner import candidates
    from app.engine.external_policy import per_request_state
    from app.runtime.llama_server import SPECULATIVE_FIELDS

    quick = external_candidates(("draft", "lookup"), "quick")
    assert quick[0] == PLAIN and SpecSettings("lookup", 8, 0, 0.0) in quick and SpecSettings("draft", 8) in quick
    assert not any(s.adaptive or s.source == "pool" for s in quick) and len(set(quick)) == len(quick)
    # The cost stop needs the bundled runtime's drafting loop: the bundled grid has it, the server sweep does not.
    assert any(s.cost_stop for s in candidates(("draft", "lookup"), "quick"))
    assert not any(s.cost_stop for s in quick)
    assert all(s.source != "lookup" for s in external_candidates(("draft",), "quick"))
    assert external_candidates((), "quick") == (PLAIN,)
    n4 = SpecSettings("draft", 4, 0, 0.5)
    assert per_request_state(SPECULATIVE_FIELDS, None, n4).applied
    fixed = per_request_state((), n4, n4)
    assert not fixed.applied and "n4,p0.5" in fixed.why and "best static" in fixed.why
    assert "set at its start" in per_request_state(("speculative.n_max",), None, n4).why
