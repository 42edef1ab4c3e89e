"""The model dialog's runtime settings: flash attention and an external llama-server, chosen, loaded and remembered."""

from __future__ import annotations

from pathlib import Path

from app.gui.main import MainWindow, gui_settings
from app.gui.model import ModelDialog


def test_dialog_validates_and_returns_runtime_settings(qtbot, smollm2_path: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dlg = ModelDialog(None)
    qtbot.addWidget(dlg)
    assert dlg.flash_attn.currentText() == "auto"  # llama.cpp's own default
    dlg.model.setText(str(smollm2_path))
    dlg.server.setText(str(tmp_path / "no-such-llama-server"))
    dlg._accept()
    assert "llama-server binary does not exist" in dlg.error.text()
    assert dlg.result() == 0  # not accepted
    dlg.server.clear()
    dlg.flash_attn.setCurrentText("off")
    dlg._accept()
    choice = dlg.choice()
    assert choice is not None and choice.server_binary is None and choice.flash_attn == "off"
    config = choice.config()
    assert config.flash_attn == "off" and config.server_binary is None


def test_external_runtime_loads_from_the_dialog_and_is_remembered(  # type: ignore[no-untyped-def]
    qtbot, make_window, smollm2_path: Path, llama_server_binary: str
) -> None:
    w: MainWindow = make_window()
    dlg = ModelDialog(None)
    qtbot.addWidget(dlg)
    dlg.model.setText(str(smollm2_path))
    dlg.server.setText(llama_server_binary)
    dlg._accept()
    choice = dlg.choice()
    assert choice is not None and choice.server_binary == llama_server_binary
    assert choice.label.endswith("on llama-server")
    with qtbot.waitSignal(w.models.loaded, timeout=120_000):
        w.models.load(choice)
    engine = w.engine
    assert engine is not None
    from app.engine.external import ExternalSession
    from app.engine.types import GenerationRequest
    from app.runtime.sampling import SamplingParams

    assert engine.call(lambda s: isinstance(s, ExternalSession), timeout=30)
    req = GenerationRequest(
        messages=({"role": "user", "content": "Say hello."},), max_tokens=8, sampling=SamplingParams()
    )
    summary = engine.generate(req)
    assert summary.timings.predicted_n > 0 and summary.text
    assert summary.dynamic_draft["prompt_tokens"] == summary.prompt_tokens  # DD saw the server's exact count
    assert gui_settings().value("model/server_binary") == llama_server_binary
    # The status bar says which per-request fields this build honours (from its /props).
    qtbot.waitUntil(lambda: "honours" in w.st_model.toolTip(), timeout=10_000)
    w.close()  # closes the engine, which stops the server
    w2: MainWindow = make_window()
    saved = w2._saved_choice()
    assert saved is not None and saved.server_binary == llama_server_binary and saved.model == str(smollm2_path)
