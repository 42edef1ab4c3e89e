"""The Calibrate panel: a tiny real calibration runs from the button, shows its table, and can be cancelled."""

from __future__ import annotations

from app.calibration.quick import run_quick
from app.policy.store import calibration_store
from app.speculative.settings import PLAIN, SpecSettings


def _tiny(engine, progress, cancel, contexts=(64,), classes=("copy_edit",), **changes):  # type: ignore[no-untyped-def]
    return run_quick(
        engine,
        progress,
        cancel,
        contexts=contexts,
        candidates=(PLAIN, SpecSettings("lookup", 4)),
        gen_tokens=6,
        repeats=1,
        budget_s=None,
        classes=classes,
        **changes,
    )


def test_tiny_calibration_from_the_panel_shows_its_table(qtbot, gui_engine) -> None:  # type: ignore[no-untyped-def]
    from app.gui.calibration_panel import CalibrationPanel

    panel = CalibrationPanel(runner=_tiny)
    qtbot.addWidget(panel)
    panel.set_engine(gui_engine)
    assert panel.button.isEnabled()
    with qtbot.waitSignal(panel.finished, timeout=180_000) as blocker:
        panel.button.click()
        assert panel.cancel_btn.isVisible() or panel._call is not None
    result = blocker.args[0]
    assert result.saved_to is not None and result.saved_to.is_file()
    # One context-only row and the copy_edit class's own row, under a leading Class column.
    assert panel.report.rowCount() == 2 and panel.report.horizontalHeaderItem(0).text() == "Class"
    assert [panel.report.item(i, 0).text() for i in range(2)] == ["any", "copy_edit"]
    assert panel.report.item(0, 1).text() == result.table.rows[0].prompt_tokens.__str__()
    assert set(result.table.class_ranges) == {"copy_edit"}
    # the new table's id: another test's table may have been active (and shown) before this one was saved
    qtbot.waitUntil(lambda: f"Active table {result.table.table_id}" in panel.table_status.text(), timeout=30_000)
    # what the table was measured on, down to how many prompts each class had
    assert "(measured: 1 context, " in panel.table_status.text()
    assert "classes: copy_edit, up to 2 prompts each" in panel.table_status.text()


def test_cancel_keeps_the_previous_state(qtbot, gui_engine) -> None:  # type: ignore[no-untyped-def]
    from app.gui.calibration_panel import CalibrationPanel

    def slow(engine, progress, cancel):  # type: ignore[no-untyped-def]
        return _tiny(engine, progress, cancel, contexts=(64, 200, 400, 800))

    panel = CalibrationPanel(runner=slow)
    qtbot.addWidget(panel)
    panel.set_engine(gui_engine)
    panel.button.click()
    qtbot.waitUntil(lambda: panel.progress.value() >= 1, timeout=120_000)
    panel.cancel_btn.click()
    qtbot.waitUntil(lambda: "cancelled" in panel.status.text(), timeout=120_000)
    cfg = gui_engine.config
    assert calibration_store(cfg.model, cfg.draft).active_id() is None


def test_calibrating_on_a_file_fills_the_class_its_text_falls_in(qtbot, gui_engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from app.gui.calibration_panel import CalibrationPanel

    code = tmp_path / "mine.py"
    code.write_text("def load(path):\n    with open(path) as f:\n        return [ln.split(',') for ln in f]\n\n" * 8)
    panel = CalibrationPanel(runner=lambda e, p, c, **ch: _tiny(e, p, c, classes=(), **ch))
    qtbot.addWidget(panel)
    panel.set_engine(gui_engine)
    with qtbot.waitSignal(panel.finished, timeout=180_000) as blocker:
        panel.start_on_text_file(str(code))
        assert "fills the code class" in panel.status.text()
    table = blocker.args[0].table
    assert set(table.class_ranges) == {"code"}  # the detector put the file in code; the other classes kept none
    assert "your own text" in table.notes and "classes: code, up to 2 prompts each" in table.notes
