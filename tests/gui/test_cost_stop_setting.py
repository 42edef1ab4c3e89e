"""The chat settings' "Cost stop" checkbox, clicked in the real dialog, reaches the engine request and is saved."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QCheckBox, QComboBox

from app.gui.chat_settings import ConversationSettingsDialog
from app.gui.main import MainWindow


def _through_the_dialog(w: MainWindow, qtbot, check: bool) -> None:  # type: ignore[no-untyped-def]
    """Click "Chat settings…", pick prompt lookup, set the checkbox by clicking it, press OK."""
    seen: list[bool] = []

    def drive() -> None:
        dlg = QApplication.activeModalWidget()
        assert isinstance(dlg, ConversationSettingsDialog)
        mode = dlg.findChild(QComboBox, "spec_mode")
        assert mode is dlg.spec_mode and mode is not None
        mode.setCurrentIndex(mode.findData("lookup"))
        box = dlg.findChild(QCheckBox, "spec_cost_stop")
        assert box is not None
        if box.isChecked() != check:
            qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
        seen.append(box.isChecked())
        shots = os.environ.get("DYNADRAFT_SHOTS")
        if shots and check:  # a screenshot for the report: DYNADRAFT_SHOTS=/work/brief/shots pytest ...
            dlg.grab().save(str(Path(shots) / "cost-stop-chat-settings.png"))
        dlg.accept()

    QTimer.singleShot(200, drive)
    qtbot.mouseClick(w.chat.settings_btn, Qt.MouseButton.LeftButton)  # exec() returns once drive() accepted
    assert seen == [check]


def test_the_cost_stop_checkbox_reaches_the_request(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=gui_engine)
    w.chat.new_conversation()
    w.chat.apply_settings(None, {"temperature": 0.0, "max_tokens": 12})
    for check, label in ((True, "lookup n8,p0,cost"), (False, "lookup n8,p0")):
        _through_the_dialog(w, qtbot, check)
        assert w.chat.conv is not None and w.chat.conv.settings["spec_cost_stop"] is check  # saved with the chat
        with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
            assert w.chat.send("Repeat: one two three one two three")
        saved = blocker.args[0]
        assert saved is not None and saved.stats["spec"] == label


def test_adaptive_length_reaches_the_request_and_the_pool_waits_for_a_source(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    """The pool is offered (disabled, saying why, where only prompt lookup is loaded) and adaptive length is a
    checkbox beside the depth: clicked in the real dialog, it reaches the request."""
    w: MainWindow = make_window(engine=gui_engine)
    w.chat.new_conversation()
    w.chat.apply_settings(None, {"temperature": 0.0, "max_tokens": 12})
    seen: list[str] = []

    def drive() -> None:
        dlg = QApplication.activeModalWidget()
        assert isinstance(dlg, ConversationSettingsDialog)
        try:  # a failed check still closes the dialog (else exec() never returns)
            pool = dlg.spec_mode.findData("pool")
            assert pool >= 0 and not dlg.spec_mode.model().item(pool).isEnabled()  # type: ignore[attr-defined]
            seen.append(str(dlg.spec_mode.itemData(pool, Qt.ItemDataRole.ToolTipRole)))
            dlg.spec_mode.setCurrentIndex(dlg.spec_mode.findData("lookup"))
            box = dlg.findChild(QCheckBox, "spec_adaptive")
            assert box is not None and not box.isChecked()
            qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
        finally:
            dlg.accept()

    QTimer.singleShot(200, drive)
    qtbot.mouseClick(w.chat.settings_btn, Qt.MouseButton.LeftButton)
    assert seen and "draft model" in seen[0]
    assert w.chat.conv is not None and w.chat.conv.settings["spec_adaptive"] is True
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
        assert w.chat.send("Repeat: one two three one two three")
    assert blocker.args[0] is not None and blocker.args[0].stats["spec"] == "lookup n8,p0 adaptive"
