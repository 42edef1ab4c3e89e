"""The architecture's contracts (pyproject.toml's [tool.importlinter]; the test command runs lint-imports on app/ as a
gate): a violating import breaks them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
MODULES = ("cli", "selftest", "__main__", "launch", "paths")
PACKAGES = ("gui", "calibration", "server", "engine", "policy", "speculative", "models", "runtime")


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), str(cwd / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def test_a_violating_import_breaks_the_contracts(tmp_path: Path) -> None:
    """The same contracts over a tiny `app`: a function-level import up the layers, Qt and llama_cpp outside their
    packages, and a circle between two engine modules each fail."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    app = tmp_path / "app"
    for package in PACKAGES:
        (app / package).mkdir(parents=True)
        (app / package / "__init__.py").write_text("")
    (app / "__init__.py").write_text("")
    for module in MODULES:
        (app / f"{module}.py").write_text("")
    # The one ignored import (known debt, see pyproject.toml) must exist for the contract to accept its ignore.
    (app / "speculative" / "settings.py").write_text("from app.speculative import registry\n")
    (app / "speculative" / "registry.py").write_text("")
    (app / "runtime" / "probe.py").write_text("def f():\n    from app.engine import session\n")
    (app / "models" / "probe.py").write_text("import PySide6\nimport llama_cpp\n")
    (app / "engine" / "session.py").write_text("from app.engine import cache\n")
    (app / "engine" / "cache.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.engine import session\n"
    )
    out = _lint(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "app.runtime.probe -> app.engine.session" in out.stdout
    assert "app.models.probe -> PySide6" in out.stdout and "app.models.probe -> llama_cpp" in out.stdout
    assert "No cycles are allowed in app.engine" in out.stdout
    assert "4 broken" in out.stdout
