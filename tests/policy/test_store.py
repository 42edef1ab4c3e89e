"""Table files: JSON round trip, atomic writes with history, and visible reasons for missing/corrupt/stale."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from app.policy import DynamicDraftPolicy, FrontierRow, FrontierTable, Measurement, TableStore, build_rows
from app.policy.table import SCHEMA_VERSION, ranges_from_points
from app.speculative.settings import PLAIN, SpecSettings
from tests.policy.helpers import FP, N2, N4, WIDE, make_table


def test_json_round_trip(seed_table: FrontierTable) -> None:
    again = FrontierTable.from_json(seed_table.to_json())
    assert again == seed_table
    assert json.loads(seed_table.to_json())["schema_version"] == SCHEMA_VERSION == 2


def test_table_validation() -> None:
    row = FrontierRow(0, 100, N2, 10.0, 1.0, 3, True)
    with pytest.raises(ValueError, match="duplicate"):
        FrontierTable("t", "now", FP, (row, row))
    with pytest.raises(ValueError, match="overlap"):
        FrontierTable("t", "now", FP, (row, FrontierRow(50, 200, N2, 10.0, 1.0, 3, True)))
    with pytest.raises(ValueError):
        FrontierRow(100, 100, N2, 10.0, 1.0, 3, True)
    with pytest.raises(ValueError):
        FrontierRow(0, 100, N2, 10.0, 1.0, 0, True)  # safe without repeats


def test_source_names_are_checked_where_intent_or_a_table_becomes_settings(seed_table: FrontierTable) -> None:
    """SpecSettings itself takes any name (it does not import the registry, whose sources build SpecSettings); a
    table that names a source this build lacks is refused when read, as a user's choice is (registry.from_intent)."""
    from app.speculative.registry import from_intent

    assert SpecSettings("someday", 4).source == "someday"
    with pytest.raises(ValueError, match="source name"):
        SpecSettings("", 4)
    with pytest.raises(ValueError, match="must be one of draft, lookup, mtp, none, pool, got 'someday'"):
        from_intent("someday")
    data = json.loads(seed_table.to_json())
    data["rows"][0]["setting"]["source"] = "someday"
    with pytest.raises(ValueError, match="got 'someday'"):
        FrontierTable.from_json(json.dumps(data))


def test_build_rows_from_samples() -> None:
    rows = build_rows(
        [
            Measurement(0, 100, SpecSettings(source="draft", n_max=0), (10.0, 12.0, 11.0, 30.0), True, 64),
            Measurement(0, 100, N2, (20.0, 22.0, 21.0), True),
            Measurement(0, 100, N4, (), True),  # crashed: no samples
        ]
    )
    plain, n2, n4 = rows
    assert plain.setting == PLAIN  # n_max 0 is plain decoding, normalized to "off"
    assert plain.median_tps == 11.5 and plain.repeats == 4 and plain.prompt_tokens == 64
    assert plain.spread_tps == pytest.approx(16.5 - 10.75)
    assert n2.median_tps == 21.0 and n2.spread_tps == 1.0 and n2.safe
    assert not n4.safe and n4.repeats == 0
    with pytest.raises(ValueError, match="plain"):
        build_rows([Measurement(0, 100, N2, (1.0,), True)])


def test_ranges_from_points() -> None:
    assert ranges_from_points([1024, 4096]) == [(0, 2048), (2048, 4097)]
    assert ranges_from_points([100, 400], upper=1000) == [(0, 200), (200, 1000)]


def test_missing(tmp_path) -> None:
    res = TableStore(tmp_path).load_active(FP)
    assert res.status == "missing" and not res.usable and res.table is None and str(tmp_path) in res.message
    assert DynamicDraftPolicy.from_load_result(res, FP).decide(10, None, WIDE)[1].reason == "no_table"


def test_save_load_and_history_keeps_earlier_tables(tmp_path, seed_table: FrontierTable) -> None:
    store = TableStore(tmp_path)
    p1 = store.save(seed_table)
    second = make_table({PLAIN: [1.0] * 5, N2: [2.0] * 5}, [3946, 65536, 131072, 200704, 262144])
    second = replace(second, table_id=seed_table.table_id + "-b")  # ids sort by time; force the order
    p2 = store.save(second)
    assert p1.exists() and p2.exists() and store.active_id() == second.table_id
    res = store.load_active(FP)
    assert res.usable and res.table == second
    hist = store.history()
    assert [e.table_id for e in hist] == [second.table_id, seed_table.table_id]
    assert hist[0].active and not hist[1].active and hist[1].rows == len(seed_table.rows)
    store.activate(seed_table.table_id)
    assert store.load_active(FP).table == seed_table
    with pytest.raises(FileExistsError):
        store.save(seed_table)
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_failed_write_keeps_previous_active(tmp_path, seed_table: FrontierTable, monkeypatch) -> None:
    store = TableStore(tmp_path)
    store.save(seed_table)
    before = store.active_path.read_text()
    other = replace(seed_table, table_id="zzz")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        store.save(other)
    monkeypatch.undo()
    assert store.active_path.read_text() == before
    assert store.load_active(FP).table == seed_table
    assert [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")] == []


def test_corrupt_table_file(tmp_path, seed_table: FrontierTable) -> None:
    store = TableStore(tmp_path)
    path = store.save(seed_table)
    path.write_text(seed_table.to_json()[:-40])
    res = store.load_active(FP)
    assert res.status == "corrupt" and path.name in res.message and res.table is None
    assert DynamicDraftPolicy.from_load_result(res, FP, default=N4).decide(10, None, WIDE)[0] == N4
    assert store.history()[0].error


def test_corrupt_pointer_and_wrong_schema(tmp_path, seed_table: FrontierTable) -> None:
    store = TableStore(tmp_path)
    path = store.save(seed_table)
    store.active_path.write_text("{not json")
    assert store.load_active(FP).status == "corrupt"
    store.activate(seed_table.table_id)
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    res = store.load_active(FP)
    assert res.status == "corrupt" and "schema_version" in res.message
    data["schema_version"] = 1
    data["rows"][0]["median_tps"] = "fast"
    path.write_text(json.dumps(data))
    assert store.load_active(FP).status == "corrupt"


def test_stale_load_result(tmp_path, seed_table: FrontierTable) -> None:
    store = TableStore(tmp_path)
    store.save(seed_table)
    other = replace(FP, device="other GPU")
    res = store.load_active(other)
    assert res.status == "stale" and "device" in res.message and res.table == seed_table
    rec = DynamicDraftPolicy.from_load_result(res, other).decide(10, None, WIDE)[1]
    assert rec.reason == "stale_table"


def test_default_root_follows_dynadraft_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DYNADRAFT_HOME", str(tmp_path))
    assert TableStore().root == tmp_path / "calibration"
