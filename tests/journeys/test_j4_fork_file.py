"""J4: a ROCmFPx file (fork type ids, written with gguf-py) gets the same answer from `models --inspect`,
`generate`, `serve` and the app, before anything is loaded: the fork runtime, the IQ3_S build, the Runtime field."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported

from pathlib import Path

import pytest

from tests.journeys.helpers import dynadraft
from tests.models.models_testlib import write_gguf

STRIX_NAME = "Qwen3.6-35B-A3B-MTP-ROCmFP4-STRIX-embF16-headQ6.gguf"  # a catalog file name: the family is known
ANSWER = (
    "needs the fork runtime (ROCmFPx)",
    "dynadraft pull qwen3.6-35b-a3b-iq3_s",
    "Runtime field",
    "--server-binary",
)


@pytest.fixture
def fork_file(tmp_path: Path) -> Path:
    return write_gguf(
        tmp_path / STRIX_NAME,
        file_type=105,  # the fork's ROCmFP4_STRIX file type
        tensor_types={
            "token_embd.weight": 1,
            "blk.0.attn_q.weight": 100,
            "blk.0.ffn_down.weight": 101,
            "output.weight": 14,
        },
    )


def _says_it(text: str) -> None:
    for part in ANSWER:
        assert part in text, (part, text)
    assert "unsupported format or corrupt file" not in text  # llama.cpp's generic error never shows


def test_j4_cli_entry_points_give_the_inspect_answer(fork_file: Path) -> None:
    inspect = dynadraft("models", "--inspect", str(fork_file))
    assert inspect.returncode == 0
    _says_it(inspect.stdout)
    gen = dynadraft("generate", "--model", str(fork_file), "--prompt", "Hi", "--max-tokens", "2", "--temperature", "0")
    assert gen.returncode == 1
    _says_it(gen.stderr)
    serve = dynadraft("serve", "--model", str(fork_file), "--port", "0", timeout=120)
    assert serve.returncode == 1
    _says_it(serve.stderr)


def test_j4_the_app_answers_before_loading(qtbot, fork_file: Path) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QMessageBox

    from app.gui.main import MainWindow
    from app.gui.model import ModelChoice, ModelDialog

    dlg = ModelDialog(None)
    qtbot.addWidget(dlg)
    dlg.model.setText(str(fork_file))
    dlg._accept()  # the dialog's Load button
    assert dlg.result() == 0  # not accepted: nothing is loaded
    _says_it(dlg.error.text())

    w = MainWindow(autoload=False)
    qtbot.addWidget(w)
    w.show()
    try:
        w.models.load(ModelChoice(str(fork_file)))  # e.g. a double-click in the Models panel
        qtbot.waitUntil(lambda: not w.models.busy, timeout=60_000)
        assert w.engine is None
        _says_it(w.welcome.status.text())
        box = w.findChild(QMessageBox, "load_failed")
        assert box is not None and box.isVisible()
        _says_it(box.text())
        box.close()
        # The Models panel's badge for the same file in the models folder (it tested a field that did not exist).
        import shutil

        from app.paths import get_paths

        get_paths().models.mkdir(parents=True, exist_ok=True)
        shutil.copy(fork_file, get_paths().models / fork_file.name)
        w.models_panel.refresh()
        items = [w.models_panel.local.topLevelItem(i) for i in range(w.models_panel.local.topLevelItemCount())]
        assert any(it.text(0) == fork_file.name and "needs the fork runtime (ROCmFPx)" in it.text(3) for it in items)
    finally:
        w.close()
