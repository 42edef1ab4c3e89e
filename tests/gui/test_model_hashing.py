"""A new model file's first load: its hash (the prompt cache's identity needs it) shows progress and can be cancelled."""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from app.engine.identity import is_hashed
from app.gui.main import MainWindow
from app.gui.model import ModelChoice


def test_a_new_file_is_checked_once_with_progress(qtbot, make_window, smollm2_path: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fresh = tmp_path / "smol-copy.gguf"  # a file this data folder has never hashed
    shutil.copyfile(smollm2_path, fresh)
    w: MainWindow = make_window()
    seen: list[tuple[str, int, int]] = []
    w.models.hashing.connect(lambda name, done, total: seen.append((name, done, total)))
    with qtbot.waitSignal(w.models.loaded, timeout=60_000):
        w.models.load(ModelChoice(str(fresh), n_ctx=512))
    size = fresh.stat().st_size
    assert seen and seen[-1] == ("smol-copy.gguf", size, size) and is_hashed(fresh)
    assert not w.cancel_load_btn.isVisible()
    seen.clear()
    with qtbot.waitSignal(w.models.loaded, timeout=60_000):  # the same file again: known, nothing to check
        w.models.load(ModelChoice(str(fresh), n_ctx=1024))
    assert seen == []


def test_cancel_stops_the_check_and_loads_nothing(qtbot, make_window, smollm2_path: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    big = tmp_path / "big.gguf"  # a real GGUF with 3 GiB of (sparse) padding after it: seconds to hash
    shutil.copyfile(smollm2_path, big)
    with big.open("r+b") as f:
        f.truncate(big.stat().st_size + (3 << 30))
    w: MainWindow = make_window()
    with qtbot.waitSignal(w.models.hashing, timeout=30_000):
        w.models.load(ModelChoice(str(big), n_ctx=512))
    qtbot.waitUntil(w.cancel_load_btn.isVisible, timeout=10_000)
    assert w.st_model.text().startswith("Checking big.gguf:")
    with qtbot.waitSignal(w.models.failed, timeout=30_000):
        w.cancel_load_btn.click()
    assert w.models.cancelled and w.models.engine is None and not is_hashed(big)
    assert not w.cancel_load_btn.isVisible() and "cancelled" in w.welcome.status.text()
    assert w.findChild(QMessageBox, "load_failed") is None  # the user's own cancel is no failure box
