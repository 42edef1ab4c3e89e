"""bench/ as a package: bench/README.md names every runnable script, names are unique, nothing edits sys.path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
MAIN = 'if __name__ == "__main__":'


def _modules() -> list[Path]:
    return sorted(p for p in BENCH.rglob("*.py") if "results" not in p.relative_to(BENCH).parts)


def _scripts() -> list[Path]:
    """Every module of a bench/ folder with a `__main__` block: what `dynadraft bench NAME` can run."""
    return [p for p in _modules() if p.parent != BENCH and MAIN in p.read_text()]


def _named(text: str, name: str) -> bool:
    """`name` appears in `text` as a whole name: "measure.py" is not named by "mtp_measure.py"."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text) is not None


def test_the_theme_folders_hold_scripts() -> None:
    folders = {p.parent.name for p in _scripts()}
    assert {"engine", "server", "lib", "gpu"} <= folders, folders


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: str(p.relative_to(BENCH)))
def test_the_readme_names_every_runnable_script(script: Path) -> None:
    readme = (BENCH / "README.md").read_text()
    module = ".".join(script.relative_to(ROOT).with_suffix("").parts)
    assert _named(readme, module) or _named(readme, script.name), f"bench/README.md does not name {module}"


def test_a_readme_check_tells_a_file_name_from_a_longer_one() -> None:
    assert _named("`bench/gpu/measure.py` and `bench.lib.simulate`", "measure.py")
    assert not _named("`bench/gpu/mtp_measure.py`", "measure.py")
    assert not _named("`bench.lib.simulate_mtp`", "bench.lib.simulate")


def test_every_script_name_is_unique_so_dynadraft_bench_finds_one() -> None:
    names = [p.stem for p in _scripts()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_no_bench_module_edits_sys_path() -> None:
    edits = [str(p.relative_to(ROOT)) for p in _modules() if "sys.path" in p.read_text()]
    assert edits == [], edits
