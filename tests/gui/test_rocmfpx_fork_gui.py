"""The app on the real fork: a real ROCmFPx file loaded through the fork runtime chosen in the model dialog, then a chat."""

from __future__ import annotations

import os
from pathlib import Path

from app.gui.main import MainWindow
from app.gui.model import ModelDialog


def test_the_app_runs_a_rocmfpx_file_on_the_fork_runtime(  # type: ignore[no-untyped-def]
    qtbot, make_window, smollm2_rocmfp4: Path, fork_server_binary: str
) -> None:
    w: MainWindow = make_window()
    dlg = ModelDialog(None)
    qtbot.addWidget(dlg)
    dlg.model.setText(str(smollm2_rocmfp4))
    dlg.server.setText(fork_server_binary)
    dlg._accept()
    choice = dlg.choice()
    assert choice is not None and choice.server_binary == fork_server_binary
    with qtbot.waitSignal(w.models.loaded, timeout=120_000):
        w.models.load(choice)
    w.chat.new_conversation()
    w.chat.apply_settings("You are a helpful assistant.", {"temperature": 0.0, "max_tokens": 24, "spec_mode": "off"})
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
        assert w.chat.send("Name three colors.")
    saved = blocker.args[0]
    assert saved is not None and saved.role == "assistant" and saved.content.strip()
    assert saved.stats["dd"]["reason"] == "override"  # the chat settings ask for plain decoding ("off")
    from app.engine.external import ExternalSession

    engine = w.engine
    assert engine is not None and engine.call(lambda s: isinstance(s, ExternalSession), timeout=30)
    # The status bar's tooltip says what this build honours per request (read from its /props).
    qtbot.waitUntil(lambda: "honours" in w.st_model.toolTip(), timeout=10_000)
    assert "none of speculative" in w.st_model.toolTip()
    shots = os.environ.get("DYNADRAFT_SHOT_DIR")  # set by hand to keep a screenshot of this journey
    if shots:
        w.grab().save(str(Path(shots) / "fork-chat.png"))
