"""GUI fixtures: Qt offscreen (set before Qt is imported), one real engine on SmolLM2-135M for the session."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no screen on CI/dev boxes; must precede any Qt import

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("PySide6", reason="the GUI needs PySide6 (pip install -e '.[dev]')")
pytest.importorskip("pyqtgraph", reason="the GUI needs pyqtgraph")
pytest.importorskip("pytestqt", reason="the GUI tests need pytest-qt")


@pytest.fixture(scope="session")
def gui_engine(smollm2_path: Path) -> Iterator[object]:
    """A real Engine on the small model, shared by the GUI tests (windows adopt it and never close it)."""
    from app.engine.config import EngineConfig
    from app.engine.worker import Engine

    # One core is left to the GUI thread (as a desktop app would): the latency test measures the app, not the
    # scheduler of a small, shared CI machine.
    threads = max(1, (os.cpu_count() or 2) - 1)
    eng = Engine(EngineConfig(model=str(smollm2_path), n_ctx=2048, n_threads=threads)).wait_ready(180)
    yield eng
    eng.close()


@pytest.fixture
def make_window(qtbot):  # type: ignore[no-untyped-def]
    """Build MainWindows that are closed (and their threads joined) at the end of the test."""
    from app.gui.main import MainWindow

    windows: list[MainWindow] = []

    def make(**kwargs: object) -> MainWindow:
        kwargs.setdefault("autoload", False)
        w = MainWindow(**kwargs)  # type: ignore[arg-type]
        qtbot.addWidget(w)
        w.show()
        windows.append(w)
        return w

    yield make
    for w in windows:
        if w.isVisible():
            w.close()
