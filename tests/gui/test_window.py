"""The window without a model: self-check, first-run offer, conversation management, persisted window state."""

from __future__ import annotations

from app.gui.main import MainWindow, gui_settings, self_check


def test_self_check_report() -> None:
    report = self_check()
    assert report.startswith("GUI ok: 'DynaDraft")
    assert "Chat" in report and "platform" in report


def test_first_run_offers_demo_and_writes_nothing(make_window) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window()
    assert w.windowTitle().startswith("DynaDraft")
    assert w.welcome.isVisible()
    assert not w.chat.send_btn.isEnabled()  # no model yet
    assert w.store.list_conversations() == []  # opening the app creates no empty chats
    assert w.st_model.text() == "No model"
    assert w.plots.timer.interval() <= 100  # >= 10 fps


def test_conversations_create_rename_delete_search(make_window, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QInputDialog

    w: MainWindow = make_window()
    chat = w.chat
    chat.new_conversation()
    first = chat.conv
    assert first is not None
    chat.apply_settings("You are terse.", {"temperature": 0.0, "spec_mode": "lookup"})
    chat.new_conversation()
    second = chat.conv
    assert second is not None and second.id != first.id
    assert second.system_prompt == "You are terse."  # a new chat starts from the current chat's settings
    assert chat.conversations.list.count() == 2
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("Renamed chat", True))
    chat.rename_conversation(first.id)
    assert w.store.get_conversation(first.id).title == "Renamed chat"  # type: ignore[union-attr]
    chat.conversations.search.setText("renamed")
    assert chat.conversations.list.count() == 1
    chat.conversations.search.clear()
    chat.delete_conversation(second.id, confirm=False)
    assert [c.id for c in w.store.list_conversations()] == [first.id]
    assert chat.conv is not None and chat.conv.id == first.id


def test_window_state_is_restored(make_window) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window()
    w.resize(900, 560)
    w.tabs.setCurrentIndex(1)
    w.chat.highlight.setChecked(True)
    w.close()
    assert gui_settings().value("window/tab", type=int) == 1
    w2: MainWindow = make_window()
    assert w2.tabs.currentIndex() == 1
    assert w2.chat.highlight.isChecked()
    assert w2.height() == 560  # (the offscreen screen is 800 px wide, so restoreGeometry clamps the width)
    assert not gui_settings().value("window/state").isEmpty()
