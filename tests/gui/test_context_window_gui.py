"""The app says which context window it loaded: the status bar's model label, its tooltip, and a message when the
window is not the one asked for (here capped at the model's training context, as llama-server caps it); the model
dialog says a chosen model's training context and its context box stops there."""

from __future__ import annotations

import os
from pathlib import Path

from app.gui.main import MainWindow
from app.gui.model import MAX_CTX, ModelChoice, ModelDialog
from app.runtime.llama import Model


def test_a_window_beyond_the_training_context_is_capped_and_said(qtbot, make_window, smollm2_path: Path) -> None:  # type: ignore[no-untyped-def]
    m = Model(smollm2_path)
    trained = m.n_ctx_train
    m.close()
    w: MainWindow = make_window()
    # The dialog stops at the training context (below), but a profile remembered by an earlier version, or the
    # command line's --ctx-size, can still ask for more: the engine caps it.
    choice = ModelChoice(str(smollm2_path), n_ctx=4 * trained)
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


def test_the_dialog_says_the_models_training_context_and_stops_there(  # type: ignore[no-untyped-def]
    qtbot, smollm2_path: Path, tmp_path: Path
) -> None:
    from tests.models.models_testlib import write_gguf

    long = write_gguf(tmp_path / "long.gguf", file_type=0, tensor_types={"output.weight": 0}, context_length=32768)
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("not a model")
    dlg = ModelDialog(None)
    qtbot.addWidget(dlg)
    assert dlg.trained.text() == "" and dlg.n_ctx.maximum() == MAX_CTX  # no model chosen: no limit to say
    dlg.n_ctx.setValue(16384)
    dlg.model.setText(str(smollm2_path))  # typed or pasted: said at once, before the field loses focus
    assert dlg.trained.text() == "This model was trained on 8,192 tokens: the most it can use."
    assert (dlg.n_ctx.maximum(), dlg.n_ctx.value()) == (8192, 8192)
    dlg.n_ctx.setValue(4 * 8192)  # typing more is refused by the box
    assert dlg.n_ctx.value() == 8192
    dlg._accept()
    choice = dlg.choice()
    assert choice is not None and choice.n_ctx == 8192
    dlg.model.setText(str(long))  # a model trained longer gets the window that was asked before SmolLM2 lowered it
    assert dlg.trained.text() == "This model was trained on 32,768 tokens: the most it can use."
    assert (dlg.n_ctx.maximum(), dlg.n_ctx.value()) == (32768, 16384)
    shots = os.environ.get("DYNADRAFT_SHOTS")
    if shots:
        dlg.show()
        dlg.grab().save(str(Path(shots) / "context-window-dialog.png"))
    for other in (str(not_gguf), str(tmp_path / "missing.gguf"), ""):  # nothing to say: the box is open again
        dlg.model.setText(other)
        assert dlg.trained.text() == "" and dlg.n_ctx.maximum() == MAX_CTX and dlg.n_ctx.value() == 16384


def test_a_remembered_profile_beyond_the_training_context_shows_it_capped(  # type: ignore[no-untyped-def]
    qtbot, smollm2_path: Path
) -> None:
    remembered = ModelChoice(str(smollm2_path), n_ctx=65536)
    dlg = ModelDialog(None, remembered=lambda path: remembered if path == str(smollm2_path) else None)
    qtbot.addWidget(dlg)
    dlg.model.setText(str(smollm2_path))
    dlg._model_changed()  # what leaving the field does
    assert dlg.n_ctx.value() == 8192 and "8,192" in dlg.trained.text()
    choice = dlg.choice()
    assert choice is not None and choice.n_ctx == 8192
