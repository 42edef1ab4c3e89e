"""Calibrate on your own text from the app: a chosen file, or the recent chats; too little text is refused."""

from __future__ import annotations

from pathlib import Path

from app.calibration.quick import run_quick
from app.speculative.settings import PLAIN, SpecSettings

TEXT = "Meeting notes. The quarterly numbers went up; the team shipped the parser and fixed the cache. " * 6


def _tiny(engine, progress, cancel, **changes):  # type: ignore[no-untyped-def]
    grid = {"contexts": (64,), "candidates": (PLAIN, SpecSettings("lookup", 4)), "gen_tokens": 4, "repeats": 1}
    return run_quick(engine, progress, cancel, budget_s=None, **grid, **changes)


def test_calibrate_on_a_file_and_on_recent_chats(qtbot, gui_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from app.gui.calibration_panel import CalibrationPanel

    panel = CalibrationPanel(runner=_tiny)
    qtbot.addWidget(panel)
    panel.recent_text = lambda: TEXT
    panel.set_engine(gui_engine)
    notes = tmp_path / "notes.txt"
    notes.write_text(TEXT)
    with qtbot.waitSignal(panel.finished, timeout=180_000) as done:
        panel.start_on_text_file(str(notes))
    assert f"your own text ({len(TEXT.strip())} characters)" in done.args[0].table.notes
    with qtbot.waitSignal(panel.finished, timeout=180_000) as done:
        panel.chats_btn.click()
    assert "your own text" in done.args[0].table.notes

    panel.recent_text = lambda: "hi"
    panel.chats_btn.click()
    assert "at least 200" in panel.status.text() and panel._call is None  # refused before anything runs
