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


def test_a_subclass_falls_back_per_source_to_its_class(tmp_path: Path) -> None:
    from app.engine.memory import warm_start
    from app.speculative.adaptive import AdaptiveLength, CostModel
    from app.speculative.pool import SourcePool

    store = SourceMemoryStore(tmp_path / MEMORY_FILE, "A")
    store.record("copy_edit", {"draft": ArmOutcome(0.02, 10, [0.6], 0.01, 40, 20, 90.0)} | _outcome(0.03))
    # near_copy has learnt lookup alone, and only through adaptive length (no bandit reward yet)
    store.record(("copy_edit/near_copy", "copy_edit"), {"lookup": ArmOutcome(None, 0, [0.95], None, 30, 28, 50.0)})
    pool = SourcePool(["draft", "lookup"], 1, 6)
    ws = warm_start(store, "copy_edit", pool, None, "pool", "near_copy")
    assert ws is not None and ws.keys == ("copy_edit/near_copy", "copy_edit")
    # The pool needs a reward: both arms from the class, lookup's acceptance as the class has blended it
    assert {n: u["from"] for n, u in ws.sources.items()} == {"draft": "copy_edit", "lookup": "copy_edit"}
    alone = warm_start(store, "copy_edit", None, AdaptiveLength(1, 6, CostModel()), "lookup", "near_copy")
    assert alone is not None and alone.sources["lookup"] == {
        "acceptance": [0.95], "requests": 1, "reward": None, "from": "copy_edit/near_copy"
    }  # fmt: skip
    # An unknown sub-class (or one of another class) is the class alone: the key set stays fixed
    odd = warm_start(store, "chat", SourcePool(["lookup"], 1, 6), None, "pool", "near_copy")
    assert odd is not None and odd.keys == ("chat",) and odd.to_dict()["subclass"] is None


def test_verify_costs_are_kept_per_cost_identity_beside_the_sources(tmp_path: Path) -> None:
    path = tmp_path / MEMORY_FILE
    SourceMemoryStore(path, "A").record("code", _outcome(0.03))  # a file from before verify costs: no "verify_ms"
    store = SourceMemoryStore(path, "A", costs="T@vulkan:gpu|fa=on")
    assert store.verify_costs() == {} and store.note is None
    store.record_verify_costs({1: 17.0, 2: 20.0, 9: 230.7})
    store.flush()
    assert SourceMemoryStore(path, "A", costs="T@vulkan:gpu|fa=on").verify_costs() == {1: 17.0, 2: 20.0, 9: 230.7}
    assert SourceMemoryStore(path, "A", costs="T@vulkan:gpu|fa=off").verify_costs() == {}  # other settings: own table
    assert SourceMemoryStore(path, "A").verify_costs() == {}  # no cost identity (a device profile): none
    assert SourceMemoryStore(path, "A").get("code")["lookup"].requests == 1  # the sources are untouched


@pytest.mark.parametrize(
    "costs",
    [[1, 2], {"T": {"0": 5.0}}, {"T": {"two": 5.0}}, {"T": {"2": -1.0}}, {"T": {"2": True}}, {"T": {"2": 1e300}}],
)
def test_damaged_verify_costs_move_the_file_aside(tmp_path: Path, costs: object) -> None:
    path = tmp_path / MEMORY_FILE
    path.write_text(json.dumps({"schema_version": 1, "pairs": {}, "verify_ms": costs}))
    store = SourceMemoryStore(path, "A", costs="T")
    assert store.note and "damaged" in store.note and store.verify_costs() == {}
    assert list(tmp_path.glob(f"{MEMORY_FILE}.damaged-*"))


def test_a_draft_prefill_speed_is_kept_per_pair_and_device(tmp_path: Path) -> None:
    path = tmp_path / MEMORY_FILE
    SourceMemoryStore(path, "A").record("code", _outcome(0.03))  # a file from before prefill speeds
    store = SourceMemoryStore(path, "A")
    assert store.prefill_sums("draft") is None and store.note is None
    store.record_prefill_sums("draft", (8020.0, 630.5))
    store.flush()
    assert SourceMemoryStore(path, "A").prefill_sums("draft") == (8020.0, 630.5)
    assert SourceMemoryStore(path, "B").prefill_sums("draft") is None  # another pair or device: its own
    assert SourceMemoryStore(path, "A").get("code")["lookup"].requests == 1


@pytest.mark.parametrize(
    "speeds", [[1], {"A": 3.0}, {"A": {"draft": 0.1}}, {"A": {"draft": [10, -1.0]}}, {"A": {"draft": [True, 5]}}]
)
def test_a_damaged_prefill_speed_moves_the_file_aside(tmp_path: Path, speeds: object) -> None:
    path = tmp_path / MEMORY_FILE
    path.write_text(json.dumps({"schema_version": 1, "pairs": {}, "draft_prefill": speeds}))
    store = SourceMemoryStore(path, "A")
    assert store.note and "damaged" in store.note and store.prefill_sums("draft") is None
