"""The set-up scripts a clean clone runs: where the fork's source comes from, and what happens without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The repository's scripts in a folder with nothing beside it (no ../shared), and an empty tool cache."""
    repo = tmp_path / "parent" / "repo"
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    return repo


def _fork_script(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DYNADRAFT_FORK")}
    # An unreachable repository: the clone attempt fails at once instead of reaching the network.
    base |= {"DYNADRAFT_TOOLS_CACHE": str(repo.parent / "tools"), "DYNADRAFT_FORK_REPO": str(repo / "no-such-repo")}
    return subprocess.run(
        [str(repo / "scripts" / "build-fork-server.sh"), *args],
        capture_output=True,
        text=True,
        env=base | env,
        timeout=60,
    )


def test_without_any_fork_source_the_script_says_how_to_give_one(clone: Path) -> None:
    for args in (("--path",), ("--source",), ()):
        out = _fork_script(clone, *args)
        assert out.returncode == 3, out.stderr
        assert out.stdout == ""
        reason = out.stderr.strip().splitlines()[-1]
        assert reason.startswith("no ROCmFPx fork source") and "DYNADRAFT_FORK_SOURCE" in reason


def test_a_given_source_that_does_not_exist_is_an_error_not_a_skip(clone: Path) -> None:
    out = _fork_script(clone, "--path", DYNADRAFT_FORK_SOURCE=str(clone / "missing.tar.xz"))
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_the_source_comes_from_the_variable_then_the_mirror_and_keys_the_cache_by_content(clone: Path) -> None:
    mirror = clone.parent / "shared" / "vendor"
    mirror.mkdir(parents=True)
    tree = clone.parent / "ROCmFPX-c14872f"
    tree.mkdir()
    (tree / "CMakeLists.txt").write_text("project(fake)\n")
    tarball = mirror / "ROCmFPX-c14872f.tar.xz"
    with tarfile.open(tarball, "w:xz") as tar:
        tar.add(tree, arcname=tree.name)
    assert _fork_script(clone, "--source").stdout.strip() == "../shared/vendor/ROCmFPX-c14872f.tar.xz"
    # A checkout the user names wins over the mirror, and another content is another cache folder.
    out = _fork_script(clone, "--source", DYNADRAFT_FORK_SOURCE=str(tree))
    assert out.stdout.strip() == str(tree)
    from_mirror = _fork_script(clone, "--path").stdout.splitlines()
    from_tree = _fork_script(clone, "--path", DYNADRAFT_FORK_SOURCE=str(tree)).stdout.splitlines()
    assert [Path(p).name for p in from_tree] == ["llama-server", "llama-quantize"]
    assert Path(from_mirror[0]).parent != Path(from_tree[0]).parent
    (tree / "CMakeLists.txt").write_text("project(fake2)\n")
    assert _fork_script(clone, "--path", DYNADRAFT_FORK_SOURCE=str(tree)).stdout.splitlines() != from_tree


def test_the_test_tools_are_pinned() -> None:
    pins = dict(
        line.split("==", 1)
        for line in (ROOT / "scripts" / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    for tool in ("ruff", "mypy", "pytest", "pytest-qt", "openai"):
        assert tool in {k.lower() for k in pins}, tool
    assert "-c scripts/constraints.txt" in (ROOT / "scripts" / "setup.sh").read_text()
