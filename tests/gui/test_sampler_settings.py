"""The chat settings' DRY and XTC boxes, typed in the real dialog, are saved with the chat and change its replies."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QDoubleSpinBox

from app.gui.chat_settings import ConversationSettingsDialog
from app.gui.main import MainWindow

ASK = "Write one sentence about the sea."


def _through_the_dialog(w: MainWindow, qtbot, values: dict[str, str]) -> list[str]:  # type: ignore[no-untyped-def]
    """Click "Chat settings…", type each box's value, press OK; the boxes' texts as the dialog opened."""
    shown: list[str] = []

    def drive() -> None:
        dlg = QApplication.activeModalWidget()
        assert isinstance(dlg, ConversationSettingsDialog)
        for name, text in values.items():
            box = dlg.findChild(QDoubleSpinBox, name)
            assert box is not None, name
            shown.append(box.text())
            box.lineEdit().selectAll()
            qtbot.keyClicks(box.lineEdit(), text)
        if shots := os.environ.get("DYNADRAFT_SHOTS"):
            dlg.grab().save(str(Path(shots) / "samplers-chat-settings.png"))
        dlg.accept()

    QTimer.singleShot(200, drive)
    qtbot.mouseClick(w.chat.settings_btn, Qt.MouseButton.LeftButton)  # exec() returns once drive() accepted
    return shown


def _reply(w: MainWindow, qtbot) -> str:  # type: ignore[no-untyped-def]
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
        assert w.chat.send(ASK)
    saved = blocker.args[0]
    assert saved is not None and saved.stats["tokens"] > 0
    return str(saved.content)


def test_dry_and_xtc_from_the_dialog_reach_the_reply(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=gui_engine)
    sampled = {"temperature": 0.8, "seed": 7, "max_tokens": 16, "spec_mode": "off"}
    replies = []
    for _ in range(2):
        w.chat.new_conversation()
        w.chat.apply_settings(None, sampled)
        replies.append(_reply(w, qtbot))
    plain = replies[0]
    assert replies[1] == plain  # the seed makes a new chat's reply repeatable

    w.chat.new_conversation()
    w.chat.apply_settings(None, sampled)
    shown = _through_the_dialog(w, qtbot, {"dry_multiplier": "0.8", "xtc_probability": "1", "xtc_threshold": "0.05"})
    assert shown == ["Off", "Off", "threshold 0.10"]  # a new chat's defaults: both off
    assert w.chat.conv is not None
    s = w.chat.conv.settings
    assert (s["dry_multiplier"], s["xtc_probability"], s["xtc_threshold"]) == (0.8, 1.0, 0.05)  # saved with the chat
    assert _reply(w, qtbot) != plain  # XTC left out the likeliest tokens
    if shots := os.environ.get("DYNADRAFT_SHOTS"):
        w.resize(1100, 700)
        qtbot.wait(200)
        w.grab().save(str(Path(shots) / "samplers-reply.png"))
