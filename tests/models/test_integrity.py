"""Unverifiable and truncated model files: said plainly by `pull`, `models` and the app, refused before loading."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from app.models.cli import add_models_arguments, add_pull_arguments, run_models, run_pull
from app.models.gguf_check import check_complete
from app.models.gguf_reader import GGUFError
from tests.models.models_testlib import FakeHub

REPO_ROOT = Path(__file__).resolve().parents[2]


def _truncated(src: Path, dest: Path, cut: int) -> Path:
    with open(src, "rb") as f:
        dest.write_bytes(f.read(src.stat().st_size - cut))
    return dest


def _args(adder, argv: list[str]) -> argparse.Namespace:  # type: ignore[no-untyped-def]
    p = argparse.ArgumentParser()
    adder(p)
    return p.parse_args(argv)


def test_check_complete_accepts_the_real_file_and_refuses_a_truncated_copy(smollm2: Path, tmp_path: Path) -> None:
    check_complete(smollm2)
    with pytest.raises(GGUFError, match="is truncated: its tensors need"):
        check_complete(_truncated(smollm2, tmp_path / "cut.gguf", 4096))
    with pytest.raises(GGUFError, match="damaged or truncated"):
        check_complete(_truncated(smollm2, tmp_path / "header.gguf", smollm2.stat().st_size - 2000))


def test_generate_refuses_a_truncated_model_with_a_clear_message(smollm2: Path, tmp_path: Path) -> None:
    cut = _truncated(smollm2, tmp_path / "SmolLM2-cut.gguf", 1 << 20)
    cmd = [sys.executable, "-m", "app", "generate", "--model", str(cut), "--prompt", "Hi", "--max-tokens", "1"]
    out = subprocess.run([*cmd, "--temperature", "0"], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert out.returncode == 1, out.stderr
    assert "SmolLM2-cut.gguf is truncated" in out.stderr and "download it again" in out.stderr, out.stderr


def test_unverified_download_is_said_plainly_in_pull_and_models(
    hub: FakeHub, smollm2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = smollm2.read_bytes()
    hub.add("org/plain", "plain-Q4_1.gguf", data, lfs=False)  # no LFS: the Hub reports no sha256
    hub.add("org/lfs", "lfs-Q4_1.gguf", data)
    assert run_pull(_args(add_pull_arguments, ["org/plain:plain-Q4_1.gguf", "--endpoint", hub.base])) == 0
    err = capsys.readouterr().err
    assert "plain-Q4_1.gguf is NOT VERIFIED" in err
    assert run_pull(_args(add_pull_arguments, ["org/lfs:lfs-Q4_1.gguf", "--endpoint", hub.base])) == 0
    assert "NOT VERIFIED" not in capsys.readouterr().err
    models = tmp_path / "dynadraft-home"
    _truncated(smollm2, next(models.rglob("lfs-Q4_1.gguf")).with_name("cut-Q4_1.gguf"), 4096)
    assert run_models(_args(add_models_arguments, [])) == 0
    listing = capsys.readouterr().out
    blocks = {b.split("\n")[0].rsplit("/", 1)[-1]: b for b in listing.split("\n/") if b.strip()}
    assert "integrity: NOT VERIFIED" in blocks["plain-Q4_1.gguf"], listing
    assert "integrity: sha256 verified" in blocks["lfs-Q4_1.gguf"], listing
    assert "cut-Q4_1.gguf is truncated" in blocks["cut-Q4_1.gguf"], listing
