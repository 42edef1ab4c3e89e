"""The README a newcomer reads: short, two Quick start commands that exist, links that resolve, CI runs its tests."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_readme_reads_in_five_minutes() -> None:
    assert len(README.read_text().splitlines()) <= 250


def test_quick_start_has_exactly_two_commands_and_both_exist() -> None:
    quick = _section(README.read_text(), "Quick start")
    commands = [line.strip() for block in re.findall(r"```\w*\n(.*?)```", quick, re.S) for line in block.splitlines()]
    commands = [c for c in commands if c and not c.startswith("#")]
    assert commands == ["./scripts/run.sh", "./scripts/test.sh"]
    for command in commands:
        assert (ROOT / command).is_file()


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^\./scripts/test\.sh\b", ci, re.M)


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    pages = [README, *sorted((ROOT / "docs").glob("**/*.md"))]
    assert len(pages) > 1, "the README's details live under docs/"
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor on the same page
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_the_readmes_layers_are_the_contracts_layers() -> None:
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    block = re.search(r"```text\n(.*?)```", _section(README.read_text(), "Architecture"), re.S)
    assert block is not None and block.group(1).splitlines() == layers
