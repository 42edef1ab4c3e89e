"""The source memory file: atomic, throttled writes; other engines' entries kept; damage moved aside, never raised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.policy.source_memory import MEMORY_FILE, SourceMemoryStore
from app.speculative.memory import ArmOutcome


def _outcome(reward: float) -> dict[str, ArmOutcome]:
    return {"lookup": ArmOutcome(reward, 10, [0.8], 0.01, 40, 30, 120.0)}


def test_throttled_atomic_writes_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "pair" / MEMORY_FILE
    store = SourceMemoryStore(path, "A", min_interval_s=60.0)
    store.record("code", _outcome(0.03), now=0.0)
    store.record("code", _outcome(0.01), now=1.0)  # within the interval: kept in memory, not written
    assert store.writes == 1
    assert json.loads(path.read_text())["pairs"]["A"]["code"]["lookup"]["requests"] == 1
    store.flush()
    assert store.writes == 2 and not [p for p in path.parent.iterdir() if p.name != MEMORY_FILE]  # no temp files
    again = SourceMemoryStore(path, "A")
    assert again.get("code")["lookup"].requests == 2 and again.get("chat") == {}
    other = SourceMemoryStore(path, "B")  # another device / pair in the same file: its own entry
    other.record("code", _outcome(0.5))
    assert SourceMemoryStore(path, "A").get("code")["lookup"].requests == 2
    assert SourceMemoryStore(path, "B").get("code")["lookup"].reward == 0.5


@pytest.mark.parametrize("content", [b"\xff\xfe not json", b"[1, 2]", b'{"schema_version": 1, "pairs": {"A": 3}}'])
def test_a_damaged_file_is_moved_aside_with_a_note(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / MEMORY_FILE
    path.write_bytes(content)
    store = SourceMemoryStore(path, "A")
    assert store.note and "damaged" in store.note and store.get("code") == {}
    (aside,) = tmp_path.glob(f"{MEMORY_FILE}.damaged-*")
    assert aside.read_bytes() == content and not path.exists()
    store.record("code", _outcome(0.02))
    assert SourceMemoryStore(path, "A").get("code")["lookup"].reward == 0.02


def test_an_unwritable_place_costs_the_memory_not_the_request(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the folder should be")
    store = SourceMemoryStore(blocker / MEMORY_FILE, "A")
    store.record("code", _outcome(0.02))  # the write fails: logged, not raised
    assert store.writes == 0 and store.get("code")["lookup"].requests == 1
