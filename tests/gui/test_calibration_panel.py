"""The Calibrate panel: a tiny real calibration runs from the button, shows its table, and can be cancelled."""

from __future__ import annotations

from app.calibration.quick import run_quick
from app.engine.identity import calibration_store
from app.speculative.settings import PLAIN, SpecSettings


def _tiny(engine, progress, cancel, contexts=(64,)):  # type: ignore[no-untyped-def]
    return run_quick(
        engine,
        progress,
        cancel,
        contexts=contexts,
        candidates=(PLAIN, SpecSettings("lookup", 4)),
        gen_tokens=6,
        repeats=1,
        budget_s=None,
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
    assert panel.report.rowCount() == 1
    assert panel.report.item(0, 0).text() == result.table.rows[0].prompt_tokens.__str__()
    qtbot.waitUntil(lambda: "Active table" in panel.table_status.text(), timeout=30_000)


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
