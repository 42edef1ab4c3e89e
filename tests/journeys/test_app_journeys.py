"""The app's side of the journeys, through the real main window (pytest-qt): J2's table after a CLI calibration."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported; J1 runs a real X server instead

from pathlib import Path

import pytest

pytest.importorskip("pytestqt", reason="the GUI journeys need pytest-qt")

from tests.journeys.conftest import Calibrated  # noqa: E402


@pytest.fixture
def window(qtbot, monkeypatch: pytest.MonkeyPatch, calibrated: Calibrated):  # type: ignore[no-untyped-def]
    from app.gui.main import MainWindow

    monkeypatch.setenv("DYNADRAFT_HOME", str(calibrated.home))  # the home the CLI calibrated into
    w = MainWindow(autoload=False)
    qtbot.addWidget(w)
    w.show()
    yield w
    w.close()


def test_j2_the_app_on_the_same_model_shows_the_cli_table_active(qtbot, window, calibrated: Calibrated) -> None:  # type: ignore[no-untyped-def]
    from app.gui.model import ModelChoice

    model, draft = calibrated.pair[1], calibrated.pair[3]
    # The profile the CLI ran with: defaults, one thread (as the journeys pass --threads 1 everywhere).
    window.models.load(ModelChoice(model, draft, n_threads=1))
    qtbot.waitUntil(lambda: window.engine is not None, timeout=120_000)
    cal = window.calibration
    qtbot.waitUntil(lambda: calibrated.table_id in cal.table_status.text(), timeout=60_000)
    assert cal.table_status.text().startswith("Active table")
    heads = [cal.report.horizontalHeaderItem(j).text() for j in range(cal.report.columnCount())]
    fixed = heads.index("Static fixed setting")  # after the Class column: the quick sweep measures the classes too
    assert cal.report.rowCount() >= 1 and cal.report.item(0, fixed).text() == "n2,p0"  # the CLI's fixed baseline
    assert heads[0] == "Class" and cal.report.item(0, 0).text() == "any"
    assert "Best static setting" in cal.best_static.text()
    assert Path(model).name in window.st_model.text()
    # The app remembers the profile per model: choosing this model again brings back its draft and one thread.
    again = window.remembered_choice(model)
    assert again is not None and again.n_threads == 1 and again.draft == draft
    assert window.st_backend.text().startswith(("CPU · ", "Vulkan · "))  # describe_active(), not a driver string

    # J5 in the app: the Calibrate tab's switches reach the engine (and so the endpoint's requests too).
    from app.engine.types import GenerationRequest
    from app.runtime.sampling import SamplingParams
    from app.speculative.settings import SpecSettings

    req = GenerationRequest(
        messages=({"role": "user", "content": "Hi"},),
        max_tokens=2,
        sampling=SamplingParams(temperature=0.0),
        speculative=SpecSettings(source="draft", n_max=3),
    )
    engine = window.engine
    assert engine.dd_table().table_id == calibrated.table_id
    cal.dd_force.setChecked(True)
    qtbot.waitUntil(lambda: engine.call(lambda s: s.policy.force), timeout=30_000)
    assert engine.generate(req).dynamic_draft["reason"] == "forced"
    cal.dd_on.setChecked(False)
    qtbot.waitUntil(lambda: not engine.call(lambda s: s.policy.enabled), timeout=30_000)
    assert engine.generate(req).dynamic_draft["reason"] == "disabled"
    assert engine.dd_table() is None  # the endpoint's table route answers 404 while DD is off
    cal.dd_on.setChecked(True)
    cal.dd_force.setChecked(False)


def test_j3_in_the_app_a_changed_setting_offers_recalibration(qtbot, window, calibrated: Calibrated) -> None:  # type: ignore[no-untyped-def]
    from app.gui.model import ModelChoice

    window.models.load(ModelChoice(calibrated.pair[1], calibrated.pair[3], n_threads=1, flash_attn="off"))
    qtbot.waitUntil(lambda: window.engine is not None, timeout=120_000)
    cal = window.calibration
    qtbot.waitUntil(lambda: "does not apply" in cal.table_status.text(), timeout=60_000)
    assert "flash_attn: table auto, now off" in cal.table_status.text()
    assert cal.button.text().startswith("Recalibrate") and cal.button.isEnabled()
