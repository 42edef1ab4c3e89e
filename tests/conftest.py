"""Shared fixtures: an isolated data folder for every test, and the real GGUF models from PyPI packages."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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
def qwen_pair() -> tuple[Path, Path]:
    """Qwen2.5-Coder 1.5B target and 0.5B draft: a real speculative pair (same tokenizer)."""
    from app.models.packaged import ensure_model

    return ensure_model("qwen2.5-coder-1.5b"), ensure_model("qwen2.5-coder-0.5b")


@pytest.fixture(scope="session")
def llama_server_binary() -> str:
    """llama-server built from the pinned sdist's llama.cpp (scripts/build-llama-server.sh), standing in for a fork's.

    Skips when it is missing, unless DYNADRAFT_REQUIRE_LLAMA_SERVER is set (scripts/test.sh sets it: CI must not skip).
    """
    env = os.environ.get("DYNADRAFT_LLAMA_SERVER")
    if env:
        return env
    out = subprocess.run(
        [str(REPO / "scripts" / "build-llama-server.sh"), "--path"], capture_output=True, text=True, check=True
    )
    cached = out.stdout.strip()
    if os.access(cached, os.X_OK):
        return cached
    reason = f"no llama-server: set DYNADRAFT_LLAMA_SERVER or run scripts/build-llama-server.sh (expected {cached})"
    if os.environ.get("DYNADRAFT_REQUIRE_LLAMA_SERVER"):
        pytest.fail(reason)
    pytest.skip(reason)
