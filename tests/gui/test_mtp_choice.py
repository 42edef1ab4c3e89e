"""The app offers the MTP head as a speculation choice exactly when the loaded GGUF carries MTP layers."""

from __future__ import annotations

import os
from pathlib import Path

from app.gui.chat_request import spec_from_settings
from app.gui.chat_settings import ConversationSettingsDialog
from app.gui.main import MainWindow
from app.gui.model import ModelChoice
from app.gui.store import Conversation
from app.speculative.settings import SpecSettings
from tests.engine.tiny_gguf import write_tiny_qwen35


def _mtp_item_enabled(dlg: ConversationSettingsDialog) -> bool:
    idx = dlg.spec_mode.findData("mtp")
    return bool(dlg.spec_mode.model().item(idx).isEnabled())  # type: ignore[attr-defined]


def test_mtp_is_offered_for_a_gguf_with_mtp_layers_only(qtbot, make_window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plain = write_tiny_qwen35(tmp_path / "tiny.gguf", seed=9)
    mtp = write_tiny_qwen35(tmp_path / "tiny-mtp.gguf", seed=9, mtp=True)
    w: MainWindow = make_window()
    for path, offered in ((mtp, True), (plain, False)):
        with qtbot.waitSignal(w.models.loaded, timeout=60_000):
            w.models.load(ModelChoice(str(path), n_ctx=512))
        assert w.chat.sources is not None and ("mtp" in w.chat.sources) is offered
        conv = Conversation(id=1, title="t", system_prompt="", settings={"spec_mode": "mtp", "spec_n_max": 3})
        dlg = ConversationSettingsDialog(conv, w.chat.has_draft, None, sources=w.chat.sources)
        qtbot.addWidget(dlg)
        assert _mtp_item_enabled(dlg) is offered
        if offered:
            dlg.spec_mode.setCurrentIndex(dlg.spec_mode.findData("mtp"))
            dlg.show()
            if os.environ.get("DYNADRAFT_SHOTS"):  # a folder to save a screenshot of the dialog into
                dlg.grab().save(str(Path(os.environ["DYNADRAFT_SHOTS"]) / "mtp-chat-settings.png"))
            _, values = dlg.values()
            assert spec_from_settings(values) == SpecSettings(source="mtp", n_max=3, p_min=values["spec_p_min"])


def test_without_a_table_a_reply_says_mtp_default_and_offers_calibration(qtbot, make_window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mtp = write_tiny_qwen35(tmp_path / "tiny-mtp.gguf", seed=9, mtp=True)
    w: MainWindow = make_window()
    with qtbot.waitSignal(w.models.loaded, timeout=60_000):
        w.models.load(ModelChoice(str(mtp), n_ctx=512))
    w.chat.new_conversation()
    w.chat.apply_settings("", {"temperature": 0.0, "max_tokens": 16})  # speculation left on "auto"
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
        assert w.chat.send("hello world the cat")
    stats = blocker.args[0].stats
    assert stats["dd"]["reason"] == "no_table" and stats["dd"]["default_basis"] == "mtp default"
    assert stats["spec"] == "mtp n3,p0 adaptive"
    assert "(no_table: mtp default" in w.chat.bubbles()[-1].stats_label.text()
    assert 'href="calibrate"' in w.st_dd.text() and "mtp default" in w.st_dd.toolTip()
    w.st_dd.linkActivated.emit("calibrate")  # what a click on "Calibrate…" sends
    assert w.tabs.currentWidget() is w.calibration
    qtbot.waitUntil(lambda: w.calibration.cancel_btn.isEnabled(), timeout=10_000)  # the quick calibration runs
    w.calibration.cancel_btn.click()
    qtbot.waitUntil(lambda: w.calibration.button.isEnabled(), timeout=60_000)
