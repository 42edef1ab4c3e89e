"""The chat settings' Thinking choice and thinking budget, set in the real dialog, reach a real reply and its footer."""

from __future__ import annotations

import os
import re
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QComboBox, QSpinBox

from app.gui.chat_settings import ConversationSettingsDialog
from app.gui.main import MainWindow
from tests.server.test_agents_serve import THINK_TEMPLATE


def _through_the_dialog(w: MainWindow, qtbot, thinking: str, budget: str) -> tuple[str, int]:  # type: ignore[no-untyped-def]
    """Click "Chat settings…", pick the thinking choice, type the budget, press OK; the budget box's text as the
    dialog opened, and its value once typed."""
    seen: list[tuple[str, int]] = []

    def drive() -> None:
        dlg = QApplication.activeModalWidget()
        assert isinstance(dlg, ConversationSettingsDialog)
        choice = dlg.findChild(QComboBox, "thinking")
        spin = dlg.findChild(QSpinBox, "reasoning_budget")
        assert choice is not None and spin is not None
        shown = spin.text()
        choice.setCurrentIndex(choice.findData(thinking))
        spin.lineEdit().selectAll()
        qtbot.keyClicks(spin.lineEdit(), budget)
        seen.append((shown, spin.value()))
        shots = os.environ.get("DYNADRAFT_SHOTS")
        if shots and thinking == "on":
            dlg.grab().save(str(Path(shots) / "thinking-budget-chat-settings.png"))
        dlg.accept()

    QTimer.singleShot(200, drive)
    qtbot.mouseClick(w.chat.settings_btn, Qt.MouseButton.LeftButton)  # exec() returns once drive() accepted
    assert len(seen) == 1
    return seen[0]


def test_thinking_and_its_budget_from_the_dialog(make_window, qtbot, smollm2_path: Path) -> None:  # type: ignore[no-untyped-def]
    from app.engine.config import EngineConfig
    from app.engine.worker import Engine

    # SmolLM2 under a template that opens <think> unless enable_thinking is false (as Qwen3's do); SmolLM2 never
    # closes the block by itself, so only the budget can end it.
    config = EngineConfig(model=str(smollm2_path), n_ctx=2048, n_threads=1, chat_template=THINK_TEMPLATE)
    with Engine(config).wait_ready(120) as engine:
        w: MainWindow = make_window(engine=engine, model_label="SmolLM2-135M (thinking template)")
        w.chat.new_conversation()
        w.chat.apply_settings("", {"temperature": 0.0, "max_tokens": 24, "spec_mode": "off"})

        assert _through_the_dialog(w, qtbot, "on", "6") == ("No limit", 6)  # a new chat's default: -1
        assert w.chat.conv is not None and w.chat.conv.settings["reasoning_budget"] == 6  # saved with the chat
        with qtbot.waitSignal(w.chat.reply_finished, timeout=180_000) as blocker:
            assert w.chat.send("Is the sea blue?")
        saved = blocker.args[0]
        assert saved is not None and saved.content.startswith("<think>\n") and "\n</think>\n\n" in saved.content
        assert saved.stats["reasoning"] == {"budget_tokens": 6, "reasoning_tokens": 6, "forced": True}
        bubble = w.chat.bubbles()[-1]
        assert "thinking ended at its budget of 6 tokens" in bubble.stats_label.text()
        label = re.fullmatch(r"Thought · (\d+) tokens", bubble.thinking.toggle.text())
        assert label, bubble.thinking.toggle.text()  # closed by the budget, counted with the forced end
        assert "<think>" not in bubble.body.toPlainText() and "</think>" not in bubble.body.toPlainText()
        if shots := os.environ.get("DYNADRAFT_SHOTS"):
            w.resize(1100, 700)
            qtbot.wait(200)
            w.grab().save(str(Path(shots) / "thinking-budget-reply.png"))

        # Off: the template closes an empty block in the prompt, so the reply has no thinking; "No limit" is -1.
        assert _through_the_dialog(w, qtbot, "off", "-1") == ("6 tokens", -1)
        assert w.chat.conv is not None and w.chat.conv.settings["reasoning_budget"] == -1
        with qtbot.waitSignal(w.chat.reply_finished, timeout=180_000) as blocker:
            assert w.chat.send("And the sky?")
        saved = blocker.args[0]
        assert saved is not None and "<think>" not in saved.content and saved.stats["reasoning"] is None
        bubble = w.chat.bubbles()[-1]
        assert not bubble.thinking.isVisible() and "thinking ended" not in bubble.stats_label.text()
