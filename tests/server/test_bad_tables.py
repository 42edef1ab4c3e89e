"""A damaged calibration table is ignored with a visible reason: the model loads and every request still answers."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.engine.worker import Engine
from app.policy import FrontierRow, new_table
from app.policy.schema import validate_table_json
from app.policy.store import calibration_store
from app.speculative.settings import PLAIN, SpecSettings
from tests.server.helpers import chat_body

DEEP = 100_000


def _table(engine: Engine, n_max: Any = 3) -> dict[str, Any]:
    fp = engine.call(lambda s: s.fingerprint())
    rows = [
        FrontierRow(0, 1 << 20, PLAIN, 10.0, 1.0, 3, True),
        FrontierRow(0, 1 << 20, SpecSettings(source="lookup", n_max=3), 99.0, 1.0, 3, True),
    ]
    data = new_table(fp, rows).to_dict()
    data["rows"][1]["setting"]["n_max"] = n_max
    return data


@pytest.fixture
def install(engine: Engine) -> Iterator[Any]:
    store = calibration_store(engine.config.model, engine.config.draft)

    def put(table_text: str, pointer_text: str = '{"schema_version": 1, "table_id": "t1"}') -> str:
        store.tables_dir.mkdir(parents=True, exist_ok=True)
        (store.tables_dir / "t1.json").write_text(table_text)
        store.active_path.write_text(pointer_text)
        return engine.call(lambda s: s.reload_policy())

    yield put
    shutil.rmtree(store.root, ignore_errors=True)
    engine.call(lambda s: s.reload_policy())


def _chat_ok(base_url: str) -> dict[str, Any]:
    r = httpx.post(f"{base_url}/v1/chat/completions", json=chat_body("Hi", 4), timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_float_n_max_row_is_refused_not_a_500_later(engine: Engine, base_url: str, install: Any) -> None:
    good = dict(_table(engine), table_id="t1")
    assert "using table t1" in install(json.dumps(good))  # the fixture itself is a table that loads
    dd = _chat_ok(base_url)["dynamic_draft"]
    assert dd["table_id"] == "t1" and dd["selected"]["source"] == "lookup" and dd["selected"]["n_max"] == 3
    bad = dict(_table(engine, n_max=3.0), table_id="t1")
    status = install(json.dumps(bad))
    assert "ignoring corrupt table t1.json" in status and "rows.1.setting.n_max" in status, status
    _chat_ok(base_url)


@pytest.mark.parametrize("where", ["table", "pointer"])
def test_deeply_nested_file_is_ignored_not_a_recursion_error(
    engine: Engine, base_url: str, install: Any, where: str
) -> None:
    deep = "[" * DEEP + "]" * DEEP
    if where == "table":
        status = install('{"schema_version": 1, "table_id": "t1", "rows": ' + deep + "}")
    else:
        status = install(json.dumps(dict(_table(engine), table_id="t1")), '{"table_id": ' + deep + "}")
    assert "ignoring" in status and "not a valid" in status, status
    _chat_ok(base_url)


@pytest.mark.parametrize(
    "patch",
    [
        {"rows": [{"ctx_lo": 0.0}]},
        {"schema_version": 1.0},
        {"extra_key": 1},
        {"fingerprint": {"n_ctx": "2048"}},
        {"rows": "nope"},
    ],
)
def test_schema_refuses_loose_types(engine: Engine, patch: dict[str, Any]) -> None:
    data = _table(engine)
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(data.get(k), dict):
            data[k] = {**data[k], **v}
        elif isinstance(v, list) and isinstance(data.get(k), list):
            data[k] = [{**data[k][0], **v[0]}, *data[k][1:]]
        else:
            data[k] = v
    with pytest.raises(ValueError, match="not a valid calibration table"):
        validate_table_json(json.dumps(data))
