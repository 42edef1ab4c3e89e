"""bench/gpu/mtp_measure.py's engine-vs-llama-server MTP bench on the tiny MTP GGUF and the pinned llama-server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.gpu import mtp_measure
from tests.engine.tiny_gguf import write_tiny_qwen35


@pytest.fixture(scope="module")
def tiny_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen35(tmp_path_factory.mktemp("mtpbench") / "tiny-qwen35-mtp.gguf", seed=9, mtp=True)


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mtp_measure, "NGL", 0)
    monkeypatch.setattr(mtp_measure, "THREADS", 1)
    for k, v in {"DD_MTP_BENCH_CONTEXTS": "96", "DD_MAX_TOKENS": "8", "DD_MTP_BENCH_ENGINE_ALONE": "0"}.items():
        monkeypatch.setenv(k, v)


@pytest.mark.usefixtures("small")
def test_engine_and_server_compared_with_the_same_tokens(
    tiny_mtp: Path, llama_server_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain and MTP n2 side by side: both answer, a ratio, identical greedy tokens (the server prefills in one piece)
    and the same drafted counts; the probe that found the server's flags is recorded."""
    monkeypatch.setenv("DD_MTP_BENCH_SETTINGS", "off,n2")
    monkeypatch.setenv("DD_MTP_REPRO_PROBE", "0")
    out = tmp_path / "bench.json"
    mtp_measure.mtp_bench(str(out), str(tiny_mtp), llama_server_binary)
    report = json.loads(out.read_text())
    assert [p["flags"][-1] for p in report["probes"]] == ["0"]  # the first try (no extra flag) answered
    assert [r["setting"] for r in report["runs"]] == ["off", "mtp n2,p0"]
    for row in report["runs"]:
        assert row["ratio"] and row["ratio"] > 0, row
        assert row["same_tokens"], row["tokens_check"]
        assert "--ctx-checkpoints" in row["server_flags"]
    mtp = report["runs"][1]
    assert mtp["engine"]["runs"][0]["draft_n"] == mtp["llama_server"]["runs"][0]["draft_n"] > 0


@pytest.mark.usefixtures("small")
def test_a_server_that_does_not_answer_is_recorded_not_waited_on(
    tiny_mtp: Path, llama_server_binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe timeout far below what any request takes: every try is recorded as "no answer" with what the server
    was doing, the setting gets a row saying no flags answered, and the bench moves on instead of hanging."""
    monkeypatch.setenv("DD_MTP_BENCH_SETTINGS", "n2")
    monkeypatch.setenv("DD_MTP_REPRO_PROBE", "0")
    monkeypatch.setenv("DD_SERVER_PROBE_TIMEOUT_S", "0.0001")
    out = tmp_path / "bench.json"
    mtp_measure.mtp_bench(str(out), str(tiny_mtp), llama_server_binary)
    report = json.loads(out.read_text())
    assert len(report["probes"]) == len(mtp_measure.MTP_SERVER_TRIES)
    for probe in report["probes"]:
        assert probe["error"].startswith("no answer within")
        assert "thread_states" in probe["hang"] and probe["hang"]["log_tail"]
    assert report["runs"] == [{"setting": "mtp n2,p0", "llama_server": {"error": "no flags answered"}}]
