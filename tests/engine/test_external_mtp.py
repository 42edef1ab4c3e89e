"""The model's own MTP head on the fork's llama-server (`--spec-type draft-mtp`): a tiny Qwen3.5 with one NextN block.

The fork's binary comes from DYNADRAFT_FORK_SERVER or scripts/build-fork-server.sh's cache, as for every fork test:
without either these tests skip, unless DYNADRAFT_REQUIRE_FORK_SERVER is set, where they fail instead.

The model is tests/engine/tiny_gguf.py's Qwen3.5 written twice with one seed, without and with the MTP block (the
trunk is the same). The head gets a bigram bias read off the plain model's own greedy output on the fork, so its
drafts are partly accepted. The output-head rows of the 256 byte-fallback tokens are zeroed in both files: the random
model would otherwise emit stray bytes that are not UTF-8, and the fork answers those with a 500 from its chat parser,
/completion included ("The model produced output that does not match the expected Content-only format",
common/chat.cpp), whatever the draft source.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gguf
import pytest

from app.calibration.runner import report_baseline
from app.engine.config import EngineConfig
from app.engine.external import ExternalSession, offered_sources
from app.engine.types import DoneEvent, EngineError, GenerationRequest, GenerationSummary, InvalidRequest
from app.models.inspection import inspect_gguf
from app.policy.table import FrontierTable
from app.runtime.llama_server import SPECULATIVE_FIELDS, ExternalServer, ServerSpec
from app.runtime.sampling import SamplingParams
from app.speculative.exactness import compare
from app.speculative.settings import PLAIN, SpecSettings
from tests.engine.tiny_gguf import write_tiny_qwen35

ROOT = Path(__file__).resolve().parents[2]
TINY = {"seed": 9, "mix": 0.3, "out_std": 2.0}  # tests/speculative/test_mtp.py's model
PROMPT = "hello world the cat"
BIGRAM_PROMPTS = (PROMPT, "one two three four five")
MTP_DEFAULT = SpecSettings(source="mtp", n_max=3, n_min=0, p_min=0.0)  # the engine's, at its fixed depth
# Small and quick on 2 cores: one thread, a 256-token window.
RUN = ["--ctx-size", "256", "--batch-size", "64", "--threads", "1"]


@dataclass(frozen=True)
class TinyMtp:
    plain: Path  # the same trunk without the NextN block
    mtp: Path
    reference: GenerationSummary  # plain decoding of PROMPT on the fork, with margins


def _config(path: Path, binary: str, **kw: object) -> EngineConfig:
    return EngineConfig(model=str(path), n_ctx=256, n_batch=64, n_threads=1, server_binary=binary, **kw)  # type: ignore[arg-type]


def _run(session: ExternalSession, prompt: str, spec: SpecSettings | None = None, n: int = 32) -> GenerationSummary:
    request = GenerationRequest(
        prompt=prompt, max_tokens=n, speculative=spec, sampling=SamplingParams(temperature=0.0), collect_margins=True
    )
    done = [ev for ev in session.generate(request) if isinstance(ev, DoneEvent)]
    return done[0].summary


def _without_byte_tokens(path: Path) -> Path:
    """Zero the output-head rows of the byte-fallback tokens (ids 3..258): their logit is then 0, below the best of
    the other pieces', so greedy decoding never emits them (see the module docstring)."""
    reader = gguf.GGUFReader(str(path), "r+")
    head = next(t for t in reader.tensors if t.name == "output.weight")
    head.data[3:259] = 0.0
    head.data.flush()
    return path


def _dd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def _server_commands(home: Path) -> list[str]:
    """The command line of every llama-server started under this test's data folder (each log's first line)."""
    logs = sorted((home / "logs" / "llama-server").glob("*.log"), key=lambda p: p.stat().st_mtime)
    return [p.read_text(encoding="utf-8", errors="replace").splitlines()[0] for p in logs]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, fork_server_binary: str) -> Iterator[TinyMtp]:
    folder = tmp_path_factory.mktemp("external-mtp")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DYNADRAFT_HOME", str(folder / "home"))  # the module's servers log there, never in a user's folder
        plain = _without_byte_tokens(write_tiny_qwen35(folder / "tiny-qwen35.gguf", **TINY))  # type: ignore[arg-type]
        session = ExternalSession(_config(plain, fork_server_binary))
        try:
            runs = {p: _run(session, p, n=48) for p in BIGRAM_PROMPTS}
            prompts = {p: session.format_prompt(GenerationRequest(prompt=p, max_tokens=1)) for p in BIGRAM_PROMPTS}
        finally:
            session.close()
    pairs: Counter[tuple[int, int]] = Counter()
    for p, out in runs.items():
        toks = prompts[p] + list(out.tokens)
        pairs.update(zip(toks, toks[1:], strict=False))
    bigram: dict[int, int] = {}
    for (a, b), _ in pairs.most_common():
        bigram.setdefault(a, b)
    mtp = write_tiny_qwen35(folder / "tiny-qwen35-mtp.gguf", mtp=True, mtp_next=bigram, **TINY)  # type: ignore[arg-type]
    yield TinyMtp(plain, _without_byte_tokens(mtp), runs[PROMPT])


def test_the_fork_loads_the_tiny_mtp_file_and_ignores_per_request_draft_fields(
    pair: TinyMtp, fork_server_binary: str, tmp_path: Path
) -> None:
    assert inspect_gguf(pair.mtp).mtp_layers == 1 and inspect_gguf(pair.plain).mtp_layers == 0
    flags = ("--spec-type", "draft-mtp", "--spec-draft-n-max", "3", "--spec-draft-p-min", "0")
    spec = ServerSpec(fork_server_binary, str(pair.mtp), n_ctx=256, n_batch=64, n_threads=1, extra_args=flags)
    with ExternalServer(spec, log_path=tmp_path / "server.log") as server:
        log = server.logs(None)
        assert "creating MTP draft context" in log and "adding speculative implementation 'draft-mtp'" in log
        # Its /props names none of speculative.n_max/n_min/p_min, and it means it: a request's depth and p_min change
        # nothing (tools/server/server-task.cpp reads them under `#if 0`).
        assert server.features is not None and server.features.speculative == ()
        body = {"prompt": PROMPT, "n_predict": 24, "temperature": 0.0, "cache_prompt": False}
        counts = [
            server.request("POST", "/completion", body | extra)[1]["timings"]
            for extra in ({}, {"speculative.n_max": 1, "speculative.p_min": 0.99})
        ]
    assert counts[0]["draft_n"] > 0 and counts[0]["draft_n"] == counts[1]["draft_n"]


def test_generate_on_the_fork_drafts_with_the_mtp_head_by_default(
    pair: TinyMtp, fork_server_binary: str, _isolated_home: Path
) -> None:
    out = _dd(
        "generate", "--model", str(pair.mtp), "--server-binary", fork_server_binary, "--prompt", PROMPT, "--raw",
        "--temperature", "0", "--max-tokens", "32", "--json", *RUN,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    [command] = _server_commands(_isolated_home)
    assert "--spec-type draft-mtp" in command and "--spec-draft-n-max 3" in command and " -md " not in command
    timings, dd = answer["timings"], answer["dynamic_draft"]
    assert timings["draft_n"] > 0 and 0 < timings["draft_n_accepted"] <= timings["draft_n"]
    assert dd["reason"] == "no_table" and dd["default_basis"] == "mtp default, fixed depth"
    assert dd["runtime"]["ran"] == MTP_DEFAULT.to_dict() == dd["selected"] and dd["applied_per_request"] is False
    assert answer["steps"] == timings["predicted_n"] - timings["draft_n_accepted"]
    verdict = compare(pair.reference.tokens, pair.reference.margins, answer["tokens"])
    assert verdict.acceptable, verdict.describe()  # the head only drafts: greedy output is plain decoding's


def test_requests_name_the_mtp_head_and_switch_sources(pair: TinyMtp, fork_server_binary: str) -> None:
    session = ExternalSession(_config(pair.mtp, fork_server_binary))
    try:
        assert session.capabilities.sources == ("lookup", "mtp") and session.start_settings == MTP_DEFAULT
        assert session.server.spec.draft is None and "draft-mtp" in session.server.spec.extra_args
        out = _run(session, PROMPT, SpecSettings(source="mtp", n_max=2))
        dd, runtime = out.dynamic_draft, out.dynamic_draft["runtime"]  # type: ignore[index]
        # This build ignores a request's depth (the previous test): its start depth runs, and the record says so.
        assert dd["reason"] == "override" and runtime["ignored"] == list(SPECULATIVE_FIELDS)  # type: ignore[index]
        assert out.settings == MTP_DEFAULT and out.timings.draft_n > 0
        with pytest.raises(InvalidRequest, match="adaptive length needs the bundled runtime"):
            _run(session, PROMPT, SpecSettings(source="mtp", n_max=3, adaptive=True))
        # Another source restarts the server with its flags; the head again, at the request's own depth.
        assert _run(session, PROMPT, SpecSettings(source="lookup", n_max=4)).settings.source == "lookup"
        assert "ngram-simple" in session.server.spec.extra_args
        out = _run(session, PROMPT, SpecSettings(source="mtp", n_max=2))
        assert out.settings == MTP_DEFAULT.with_(n_max=2) and out.timings.draft_n > 0
        assert "--spec-draft-n-max 2" in session.server.logs(None).splitlines()[0]
    finally:
        session.close()


def test_a_model_without_an_mtp_head_does_not_offer_it(pair: TinyMtp, fork_server_binary: str) -> None:
    session = ExternalSession(_config(pair.plain, fork_server_binary))
    try:
        assert "mtp" not in session.capabilities.sources and session.start_settings == PLAIN
        with pytest.raises(InvalidRequest, match=r"'mtp' needs the model's own head: .*has no MTP \(NextN\) layers"):
            _run(session, PROMPT, SpecSettings(source="mtp", n_max=2))
    finally:
        session.close()
    with pytest.raises(EngineError, match=r"--mtp: .*has no MTP \(NextN\) layers"):
        ExternalSession(_config(pair.plain, fork_server_binary, mtp="on"))  # refused before any server starts


def test_the_mtp_head_is_offered_only_where_the_build_and_the_config_allow(pair: TinyMtp) -> None:
    header = inspect_gguf(pair.mtp)
    config = EngineConfig(model=str(pair.mtp))
    assert offered_sources(config, header, ("none", "draft-mtp")) == (("mtp",), {})
    sources, missing = offered_sources(config, header, ("none", "draft-simple", "ngram-simple"))
    assert sources == ("lookup",) and "has no --spec-type draft-mtp" in missing["mtp"]
    sources, missing = offered_sources(EngineConfig(model=str(pair.mtp), mtp="off"), header, ("draft-mtp",))
    assert sources == () and "MTP turned off" in missing["mtp"]


def test_calibrate_on_the_fork_measures_mtp_rows(pair: TinyMtp, fork_server_binary: str) -> None:
    out = _dd(
        "calibrate", "--model", str(pair.mtp), "--server-binary", fork_server_binary, "--quick", "--contexts", "64",
        "--gen-tokens", "16", "--json", *RUN,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    table = FrontierTable.from_dict(answer["table"])
    mtp = {r.setting for r in table.rows if r.setting.source == "mtp"}
    # The registry's quick MTP grid as a server runs it: fixed depths, its adaptive row at its cap, no cost stop.
    assert mtp == {SpecSettings("mtp", n, 0, p) for n, p in ((2, 0.0), (4, 0.25), (4, 0.0), (6, 0.0))}
    assert all(r.safe and r.median_tps > 0 for r in table.rows), answer["unsafe"]
    assert report_baseline(table) == SpecSettings("mtp", 2, 0, 0.0)  # the report's static: MTP n2,p0


def test_a_prompt_the_slot_holds_exactly_is_prefilled_again_not_reused(pair: TinyMtp, fork_server_binary: str) -> None:
    """After a one-token answer the server's slot holds exactly the prompt; reusing it makes the fork re-decode the
    prompt's last token, and on this hybrid model it then aborts (common_context_seq_rm; upstream llama-server
    answers). The runtime sends such a request with cache_prompt off, so the same prompt again is answered."""
    session = ExternalSession(_config(pair.plain, fork_server_binary))
    try:
        one = _run(session, PROMPT, PLAIN, n=1)
        again = _run(session, PROMPT, PLAIN, n=8)
        assert list(again.tokens[:1]) == list(one.tokens) and session.server.running
        assert _run(session, PROMPT, PLAIN, n=8).tokens == again.tokens and session.server.running
    finally:
        session.close()
