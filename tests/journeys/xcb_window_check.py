"""Run by test_j1_launch.py under Xvfb with QT_QPA_PLATFORM=xcb (not collected on its own: Qt picks its platform
once per process, and the rest of the suite runs offscreen): the real window, first run, chat with the demo model."""

from __future__ import annotations

import os
from pathlib import Path


def test_first_launch_chats_with_the_demo_model(qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QApplication

    from app.gui.main import MainWindow

    assert QApplication.instance().platformName() == "xcb"  # type: ignore[union-attr]
    w = MainWindow()  # autoload, as `dynadraft` opens it: the first run loads the bundled demo model
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    try:
        qtbot.waitUntil(lambda: w.engine is not None, timeout=120_000)
        assert "(demo)" in w.st_model.text()
        assert w.welcome.isVisible() and "demo model" in w.welcome.title.text()
        w.chat.new_conversation()
        w.chat.apply_settings(None, {"max_tokens": 16, "temperature": 0.0})  # short: the cores are shared
        with qtbot.waitSignal(w.chat.reply_finished, timeout=180_000) as reply:
            w.chat.input.setPlainText("Say hello in one short sentence.")
            w.chat.send_btn.click()
        message = reply.args[0]
        assert message is not None and message.content.strip(), message
        shot = os.environ.get("J1_SCREENSHOT")
        if shot:
            qtbot.wait(300)  # let the last tokens paint
            assert w.grab().save(str(Path(shot)))
    finally:
        w.close()
