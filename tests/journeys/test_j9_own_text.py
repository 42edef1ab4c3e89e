"""Item 9: `dynadraft calibrate --corpus FILE` measures on the user's own kind of text."""

from __future__ import annotations

import json
from pathlib import Path

from tests.journeys.helpers import THREADS, dynadraft

TEXT = "def load(path):\n    with open(path) as f:\n        return [line.split(',') for line in f]\n\n" * 8


def test_calibrate_on_your_own_text(smollm2_path: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "mine.py"
    corpus.write_text(TEXT)
    args = ("calibrate", "--model", str(smollm2_path), "--quick", "--contexts", "48", "--gen-tokens", "4", *THREADS)
    p = dynadraft(*args, "--corpus", str(corpus), "--corpus-class", "code", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    table = json.loads(p.stdout)["table"]
    assert f"your own text ({len(TEXT.strip())} characters)" in table["notes"] and "(your text: code)" in table["notes"]
    assert "up to 2 prompts each" in table["notes"]  # quick measures two prompts of every class section
    # Every class got its own rows (the shipped sections, and this text for code), beside the context-only ones.
    assert {r.get("content_class") for r in table["rows"]} == {
        None,
        "chat",
        "code",
        "copy_edit",
        "structured",
        "near_copy",
        "additive",
    }
    wrong = dynadraft(*args, "--corpus", str(corpus), "--corpus-class", "poetry")
    assert wrong.returncode == 2 and "--corpus-class must be one of chat, code, copy_edit, structured" in wrong.stderr
    corpus.write_text("too short")
    bad = dynadraft(*args, "--corpus", str(corpus))
    assert bad.returncode == 2 and "at least 200" in bad.stderr
    few = dynadraft(*args, "--class-prompts", "0")
    assert few.returncode == 2 and "--class-prompts must be 1 to 3" in few.stderr
    missing = dynadraft(*args, "--corpus", str(tmp_path / "nope.txt"))
    assert missing.returncode == 2 and "cannot read --corpus" in missing.stderr
