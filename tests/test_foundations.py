"""The ground rules: CLI shape, data folders, Qt confined to app/gui, verified packaged models."""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app.cli import build_parser
from app.models import packaged
from app.paths import get_paths

ROOT = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ["generate", "serve", "calibrate", "pull", "models", "bench"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_help_lists_every_subcommand_and_self_test() -> None:
    out = _run("--help")
    assert out.returncode == 0
    for name in [*SUBCOMMANDS, "--self-test"]:
        assert name in out.stdout


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_has_help(name: str) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit) as e:
        parser.parse_args([name, "--help"])
    assert e.value.code == 0


def test_generate_flags_are_the_documented_ones() -> None:
    args = build_parser().parse_args(
        [
            "generate",
            "--model",
            "m.gguf",
            "--draft",
            "d.gguf",
            "--spec-n-max",
            "4",
            "--spec-p-min",
            "0.5",
            "--adaptive",
            "--pool",
            "--prompt",
            "hi",
            "--system",
            "s",
            "--max-tokens",
            "8",
            "--temperature",
            "0",
            "--seed",
            "1",
            "--json",
        ]
    )
    assert (args.spec_n_max, args.spec_p_min, args.adaptive, args.pool, args.json) == (4, 0.5, True, True, True)
    with pytest.raises(SystemExit):
        build_parser().parse_args(
            [
                "generate",
                "--model",
                "m",
                "--no-spec",
                "--spec-n-max",
                "2",
                "--prompt",
                "x",
                "--max-tokens",
                "1",
                "--temperature",
                "0",
            ]
        )


def test_data_folders_follow_dynadraft_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNADRAFT_HOME", str(tmp_path))
    p = get_paths().ensure()
    for folder in (p.models, p.cache, p.calibration, p.history, p.config, p.logs):
        assert folder.is_dir() and tmp_path in folder.parents


def test_every_app_package_says_what_belongs_there() -> None:
    for pkg in ("runtime", "engine", "speculative", "policy", "calibration", "server", "models", "gui"):
        doc = ast.get_docstring(ast.parse((ROOT / "app" / pkg / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()) == 1, pkg


def _fake_wheel(folder: Path, name: str, payload: bytes) -> Path:
    wheel = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{name}/data/part01.bin", payload)
    return wheel


def test_assembly_joins_parts_in_order_and_refuses_a_bad_checksum(tmp_path: Path) -> None:
    w1 = _fake_wheel(tmp_path, "a", b"hello ")
    w2 = _fake_wheel(tmp_path, "b", b"world")
    good = packaged.PackagedModel("t", "t.gguf", ("a", "b"), ".bin", 11, hashlib.sha256(b"hello world").hexdigest(), "")
    out = packaged.assemble(good, [w1, w2], tmp_path / "t.gguf")
    assert out.read_bytes() == b"hello world"

    bad = packaged.PackagedModel("t", "u.gguf", ("a", "b"), ".bin", 11, "0" * 64, "")
    with pytest.raises(packaged.ChecksumError):
        packaged.assemble(bad, [w2, w1], tmp_path / "u.gguf")
    assert not (tmp_path / "u.gguf").exists() and not list(tmp_path.glob("u.gguf*.part"))


def test_the_cached_models_are_the_published_files(smollm2_path: Path) -> None:
    # ensure_model verified the full sha256 when it assembled the file; re-check it here end to end.
    assert packaged.sha256_file(smollm2_path) == packaged.SMOLLM2.sha256


def test_bench_runs_from_a_checkout_and_says_where_benchmarks_live_from_an_install(tmp_path: Path) -> None:
    # From this checkout a misspelt name lists the benchmarks that exist.
    out = _run("bench", "no-such-bench")
    assert out.returncode == 2 and "policy" in out.stderr
    # An install has app/ without bench/ beside it: the command says where the benchmarks are instead of a traceback.
    shutil.copytree(ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "DYNADRAFT_BENCH_DIR"}
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "app", "bench", "policy"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "source repository's bench/" in out.stderr and "Traceback" not in out.stderr
