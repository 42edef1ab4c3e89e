"""The layer order, read from every import in app/ (module level, function level and TYPE_CHECKING alike)."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"

# Lower layers never import higher ones; packages of one rank are peers and do not import each other either.
# app/__init__.py and app/paths.py are the foundation every layer may use.
RANKS = {
    "app": 0,
    "app.paths": 0,
    "app.runtime": 1,
    "app.speculative": 2,
    "app.models": 2,
    "app.policy": 3,
    "app.engine": 4,
    "app.calibration": 5,
    "app.server": 5,
    "app.gui": 6,
    "entry points": 7,
}
ENTRY_POINTS = ("app.cli", "app.selftest", "app.__main__", "app.launch")  # the `dynadraft` command: one unit, on top
GUI_ONLY = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "shiboken6", "qtpy")


def unit(module: str) -> str:
    """The layer unit a dotted module belongs to: its package under app/, or the top-level module itself."""
    parts = module.split(".")
    name = ".".join(parts[:2]) if len(parts) > 1 else parts[0]
    return "entry points" if name in ENTRY_POINTS else name


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import statement in the file."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                out.append((node.lineno, ".".join([*base, node.module] if node.module else base)))
            else:
                out.append((node.lineno, node.module or ""))
    return out


def violations(root: Path = APP) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        here = module_name(path, root)
        mine = unit(here)
        assert mine in RANKS, f"{path}: place this package in tests/test_layers.py RANKS"
        for line, target in imports(path, root):
            where = f"{path.relative_to(root.parent)}:{line}"
            if target.split(".")[0] in GUI_ONLY and mine != "app.gui":
                found.append(f"{where} imports {target}: only app/gui may import Qt")
            if not target.startswith("app.") and target != "app":
                continue
            other = unit(target)
            if other == mine or other in ("app", "app.paths"):
                continue
            if RANKS[other] >= RANKS[mine]:
                found.append(f"{where}: {mine} (rank {RANKS[mine]}) imports {target} (rank {RANKS[other]})")
    return found


def test_lower_layers_never_import_higher_ones() -> None:
    assert violations() == []


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The rule can fail: a function-level import of engine from runtime, and Qt outside app/gui."""
    root = tmp_path / "app"
    (root / "runtime").mkdir(parents=True)
    (root / "runtime" / "probe.py").write_text("def f():\n    from app.engine.session import Session\n")
    (root / "models").mkdir()
    (root / "models" / "probe.py").write_text("from ..policy import table\nimport PySide6\n")
    assert violations(root) == [
        "app/models/probe.py:1: app.models (rank 2) imports app.policy (rank 3)",
        "app/models/probe.py:2 imports PySide6: only app/gui may import Qt",
        "app/runtime/probe.py:2: app.runtime (rank 1) imports app.engine.session (rank 4)",
    ]
