"""Model ▸ Unload model in the real window: the model is closed and its memory freed (the status bar's RAM figure
falls), the chat and the endpoint let go of it, and a model loads again afterwards."""

from __future__ import annotations

import os
from pathlib import Path

from app.gui.main import MainWindow
from app.gui.model import ModelChoice
from app.runtime.process_memory import resident_bytes


def _ram(w: MainWindow) -> float:
    text = w.st_memory.text()  # "RAM 1.23 GB"
    assert text.startswith("RAM "), text
    return float(text.split()[1])


def test_unload_frees_the_models_memory_and_a_model_loads_again(qtbot, make_window, smollm2_path: Path) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window()
    assert not w.unload_action.isEnabled()  # nothing to unload yet
    with qtbot.waitSignal(w.models.loaded, timeout=60_000):
        w.models.load(ModelChoice(str(smollm2_path), n_ctx=2048))
    w._update_status()
    loaded_bytes = resident_bytes()
    assert loaded_bytes is not None and w.unload_action.isEnabled() and w.chat.engine is not None
    before = _ram(w)

    with qtbot.waitSignal(w.models.unloaded, timeout=10_000):
        w.unload_action.trigger()
    assert w.chat.engine is None and w.endpoint.engine is None and w.models.engine is None
    assert w.st_model.text() == "No model (unloaded)" and not w.chat.send_btn.isEnabled()
    # The engine closes off the GUI thread; the figure follows within the status timer's period.
    qtbot.waitUntil(lambda: _ram(w) < before - 0.05, timeout=15_000)  # the 135M model's ~100 MB mapping is gone
    after = _ram(w)
    shots = os.environ.get("DYNADRAFT_SHOTS")
    if shots:
        w.grab().save(str(Path(shots) / "unloaded.png"))
    print(f"RAM with SmolLM2 loaded {before:.2f} GB, after Unload {after:.2f} GB")

    with qtbot.waitSignal(w.models.loaded, timeout=60_000):
        w.models.load(ModelChoice(str(smollm2_path), n_ctx=2048))
    assert w.chat.engine is not None and w.unload_action.isEnabled()
