"""Content classes through the real entry points: the class and a class row chosen from a table, over HTTP with the
`openai` client and in `dynadraft generate --json` (a subprocess), on SmolLM2-135M (no draft: lookup rows only)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from app.engine.worker import Engine
from app.policy import FrontierRow, new_table
from app.policy.store import calibration_store
from app.speculative.settings import PLAIN, SpecSettings
from tests.journeys.helpers import generate_json
from tests.server.helpers import MODEL_ID

LOOKUP3 = SpecSettings(source="lookup", n_max=3)
LOOKUP6 = SpecSettings(source="lookup", n_max=6)
BLOCK = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n\n" * 6
EDIT = BLOCK + "\nRename the function `area` to `surface` and return the full file, nothing else."  # near_copy
ADD = BLOCK + "\nAdd a docstring to every function and return the full file, nothing else."  # additive
CHAT = "Tell me something nice about autumn."
# The short copy-edit a new user tried (a ~120-character block, under MIN_BLOCK_CHARS): it was classed code before.
SHORT_EDIT = (
    "Rename `tmp` to `total` and return the whole function.\n\n```python\ndef sum_prices(items):\n    tmp = 0\n"
)
SHORT_EDIT += "    for item in items:\n        tmp += item.price * item.qty\n    return tmp\n```"


@pytest.fixture
def class_table(engine: Engine) -> Iterator[str]:
    """A hand-written table for the test engine: off is fastest context-only (and for chat), lookup n6 for copy_edit,
    lookup n3 for its near_copy sub-class (additive has no rows: copy_edit's decide), lookup n3 for code. Removed
    (and the engine back to no table) afterwards."""
    fp = engine.call(lambda s: s.fingerprint())
    whole = (0, 1 << 20)
    rows = [
        FrontierRow(*whole, PLAIN, 50.0, 1.0, 3, True),
        FrontierRow(*whole, LOOKUP3, 40.0, 1.0, 3, True),
        FrontierRow(*whole, LOOKUP6, 35.0, 1.0, 3, True),
        FrontierRow(*whole, PLAIN, 50.0, 1.0, 3, True, content_class="copy_edit"),
        FrontierRow(*whole, LOOKUP3, 70.0, 1.0, 3, True, content_class="copy_edit"),
        FrontierRow(*whole, LOOKUP6, 90.0, 1.0, 3, True, content_class="copy_edit"),
        FrontierRow(*whole, PLAIN, 50.0, 1.0, 3, True, content_class="near_copy"),
        FrontierRow(*whole, LOOKUP3, 95.0, 1.0, 3, True, content_class="near_copy"),
        FrontierRow(*whole, LOOKUP6, 80.0, 1.0, 3, True, content_class="near_copy"),
        FrontierRow(*whole, PLAIN, 50.0, 1.0, 3, True, content_class="code"),
        FrontierRow(*whole, LOOKUP3, 60.0, 1.0, 3, True, content_class="code"),
    ]
    table = new_table(fp, rows)
    store = calibration_store(engine.config.model, engine.config.draft)
    store.save(table)
    assert "using table" in engine.call(lambda s: s.reload_policy())
    yield table.table_id
    shutil.rmtree(store.root, ignore_errors=True)
    engine.call(lambda s: s.reload_policy())


def test_http_openai_client_sees_the_class_and_its_row(base_url: str, class_table: str) -> None:
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=120)

    def dd(text: str, **extra: object) -> dict:
        resp = client.chat.completions.create(
            model=MODEL_ID,
            messages=[{"role": "user", "content": text}],
            max_tokens=8,
            temperature=0,
            **extra,  # type: ignore[arg-type]
        )
        return (resp.model_extra or {})["dynamic_draft"]

    edit = dd(EDIT)
    assert edit["content_class"] == "copy_edit" and edit["class_cue"] == "edit_instruction"
    assert edit["content_subclass"] == "near_copy" and edit["subclass_cue"] == "near_copy:rename"
    assert edit["class_basis"] == "subclass_row" and edit["selected_label"] == LOOKUP3.label()
    assert edit["table_id"] == class_table and edit["applied"]
    add = dd(ADD)  # additive has no rows of its own: copy_edit's rows decide
    assert add["content_subclass"] == "additive" and add["subclass_cue"] == "additive:add"
    assert add["class_basis"] == "class_row" and add["selected_label"] == LOOKUP6.label()
    chat = dd(CHAT)
    assert chat["content_class"] == "chat" and chat["class_basis"] == "class_fallback"
    assert chat["content_subclass"] is None and chat["subclass_cue"] is None
    assert chat["selected_label"] == "off"  # chat has no rows: the context-only frontier decided
    # A JSON response_format makes the request structured whatever its text; no structured rows either.
    structured = dd(CHAT, response_format={"type": "json_object"})
    assert structured["content_class"] == "structured" and structured["class_cue"] == "request_constrained"
    assert structured["class_basis"] == "class_fallback"
    # An explicit speculative override still wins; the record still names the class.
    over = dd(EDIT, extra_body={"speculative": {"source": "lookup", "n_max": 2}})
    assert (
        over["reason"] == "override" and over["content_class"] == "copy_edit" and over["class_basis"] == "not_applied"
    )
    assert over["content_subclass"] == "near_copy"


def test_generate_json_subprocess_reports_the_class_row(smollm2_path: Path, class_table: str) -> None:
    # The same model and profile as the test engine (n_ctx 2048, one thread), so the table's fingerprint matches.
    args = ("--model", str(smollm2_path), "--ctx-size", "2048", "--threads", "1", "--max-tokens", "6")
    out, _ = generate_json(*args, "--prompt", EDIT, "--temperature", "0")
    dd = out["dynamic_draft"]
    assert dd["table_id"] == class_table and dd["content_class"] == "copy_edit" and dd["class_basis"] == "subclass_row"
    assert dd["content_subclass"] == "near_copy" and dd["subclass_cue"] == "near_copy:rename"
    assert dd["selected_label"] == LOOKUP3.label() and out["speculative"] == LOOKUP3.to_dict()
    assert out["content_class"] == "copy_edit" and out["content_subclass"] == "near_copy"  # statistics' keys too
    add, _ = generate_json(*args, "--prompt", ADD, "--temperature", "0")
    assert add["dynamic_draft"]["content_subclass"] == "additive" and add["dynamic_draft"]["class_basis"] == "class_row"
    assert add["dynamic_draft"]["selected_label"] == LOOKUP6.label() and add["speculative"] == LOOKUP6.to_dict()
    short, _ = generate_json(*args, "--prompt", SHORT_EDIT, "--temperature", "0")
    sdd = short["dynamic_draft"]
    assert sdd["content_class"] == "copy_edit" and sdd["content_subclass"] == "near_copy"
    assert sdd["class_basis"] == "subclass_row" and sdd["class_cue"] == "edit_instruction"
    assert short["speculative"]["source"] == "lookup"
    code, _ = generate_json(*args, "--prompt", "Write a Python function that reverses a string.", "--temperature", "0")
    assert code["dynamic_draft"]["content_class"] == "code" and code["content_subclass"] is None
    assert code["dynamic_draft"]["selected_label"] == LOOKUP3.label()
    assert json.dumps(code["dynamic_draft"])  # plain JSON all the way
