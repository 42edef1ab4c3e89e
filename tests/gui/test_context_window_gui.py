"""The app says which context window it loaded: the status bar's model label, its tooltip, and a message when the
window is not the one asked for (here capped at the model's training context, as llama-server caps it)."""

from __future__ import annotations

import os
from pathlib import Path

from app.gui.main import MainWindow
from app.gui.model import ModelDialog
from app.runtime.llama import Model


def test_a_window_beyond_the_training_context_is_capped_and_said(qtbot, make_window, smollm2_path: Path) -> None:  # type: ignore[no-untyped-def]
    m = Model(smollm2_path)
    trained = m.n_ctx_train
    m.close()
    w: MainWindow = make_window()
    dlg = ModelDialog(None)
    qtbot.addWidget(dlg)
    dlg.model.setText(str(smollm2_path))
    dlg.n_ctx.setValue(4 * trained)  # what the dialog allows; more than SmolLM2 was trained on
    dlg._accept()
    choice = dlg.choice()
    assert choice is not None and choice.n_ctx == 4 * trained
    with qtbot.waitSignal(w.models.loaded, timeout=120_000):
        w.models.load(choice)
    assert w.engine is not None and w.engine.model_meta.n_ctx == trained
    assert w.st_model.text().endswith(f"· {trained // 1024}k ctx")
    tip = w.st_model.toolTip()
    assert f"context window: {trained} tokens (trained on {trained})" in tip and "capped" in tip
    message = w.statusBar().currentMessage()
    assert message == f"context capped to {trained} tokens, the model's training context ({4 * trained} asked)"
    shots = os.environ.get("DYNADRAFT_SHOTS")
    if shots:  # a screenshot for the report: DYNADRAFT_SHOTS=/work/brief/shots pytest ...
        w.grab().save(str(Path(shots) / "context-window-capped.png"))
