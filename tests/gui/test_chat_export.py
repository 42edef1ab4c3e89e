"""Chat ▸ Export and Import in the real window: a chat with a real reply saved as Markdown and as JSON, the JSON
opened again as a new chat with its settings and reply stats, and a file that is not an export refused with nothing
written."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.gui.main import MainWindow


def test_export_then_import_gives_the_same_chat_and_a_bad_file_changes_nothing(  # type: ignore[no-untyped-def]
    make_window, gui_engine, qtbot, tmp_path: Path, monkeypatch
) -> None:
    w: MainWindow = make_window(engine=gui_engine)
    w.chat.new_conversation()
    w.chat.apply_settings("Be brief.", {"temperature": 0.0, "max_tokens": 8})
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000):
        assert w.chat.send("Name a colour.")
    assert w.chat.conv is not None
    original = w.chat.conv
    sent = w.store.messages(original.id)
    assert [m.role for m in sent] == ["user", "assistant"] and sent[1].stats

    for name in ("chat.md", "chat.json"):
        target = tmp_path / name
        monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, t=target, **k: (str(t), ""))
        w.export_action.trigger()
        assert target.is_file()
    md = (tmp_path / "chat.md").read_text()
    assert md.startswith(f"# {original.title}") and "Be brief." in md and "Name a colour." in md
    assert sent[1].content.strip() in md and "tok/s" in md

    before = len(w.store.list_conversations())
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(tmp_path / "chat.json"), ""))
    w.import_action.trigger()
    imported = w.chat.conv
    assert imported is not None and imported.id != original.id and len(w.store.list_conversations()) == before + 1
    assert (imported.title, imported.system_prompt, imported.settings) == (
        original.title,
        original.system_prompt,
        original.settings,
    )
    got = w.store.messages(imported.id)
    assert [(m.role, m.content, m.stats) for m in got] == [(m.role, m.content, m.stats) for m in sent]

    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"messages": []}))
    warnings: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _p, _t, text, *a, **k: warnings.append(text))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(bad), ""))
    w.import_action.trigger()
    assert warnings and "not a DynaDraft chat export" in warnings[0]
    assert len(w.store.list_conversations()) == before + 1 and w.chat.conv.id == imported.id  # nothing written
