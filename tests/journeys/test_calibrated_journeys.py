"""J2 (calibrate, then generate, serve and the app with the same defaults apply the table), J3 (a changed setting is
reported as a stale table naming the field) and J5 (the table endpoint and force mode of `dynadraft serve` and of the
app's Calibrate tab), all on one CLI calibration: the journeys share this module so that it runs once per process."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported; J1 runs a real X server instead

from pathlib import Path  # noqa: E402

import httpx  # noqa: E402
import openai  # noqa: E402
import pytest  # noqa: E402

from tests.journeys.conftest import Calibrated  # noqa: E402
from tests.journeys.helpers import THREADS, generate_json, served  # noqa: E402

PROMPT = ("--prompt", "Hi", "--max-tokens", "4", "--temperature", "0")
APPLIED = ("table_row", "fallback_static", "fallback_plain", "fallback_held_out", "catch_up")


def _chat(url: str, **extra: object) -> dict:
    client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
    r = client.chat.completions.with_raw_response.create(
        model=client.models.list().data[0].id,
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=4,
        temperature=0,
        **extra,
    )
    assert r.http_response.status_code == 200
    return r.http_response.json()


def test_j2_a_cli_calibration_applies_to_generate_and_serve(calibrated: Calibrated) -> None:
    out, _ = generate_json(*calibrated.pair, *THREADS, *PROMPT, env=calibrated.env)
    dd = out["dynamic_draft"]
    assert dd["reason"] in APPLIED and dd["table_id"] == calibrated.table_id, dd
    with served(*calibrated.pair, *THREADS, env=calibrated.env) as (url, log):
        assert any("using table " + calibrated.table_id in line for line in log), log
        dd = _chat(url)["dynamic_draft"]
        assert dd["reason"] in APPLIED and dd["table_id"] == calibrated.table_id, dd


def test_j3_a_changed_setting_reports_a_stale_table_naming_it(calibrated: Calibrated) -> None:
    changed = (*THREADS, "--flash-attn", "off")  # the table was measured with the default, auto
    out, err = generate_json(*calibrated.pair, *changed, *PROMPT, env=calibrated.env)
    dd = out["dynamic_draft"]
    assert dd["reason"] == "stale_table" and dd["stale_fields"] == ["flash_attn"], dd
    assert "flash_attn: table auto, now off" in err and "dynadraft calibrate" in err and "--flash-attn off" in err, err
    with served(*calibrated.pair, *changed, env=calibrated.env) as (url, log):
        assert any("flash_attn: table auto, now off" in line for line in log), log
        dd = _chat(url)["dynamic_draft"]
        assert dd["reason"] == "stale_table" and dd["stale_fields"] == ["flash_attn"]
        assert httpx.get(url + "/dynamic-draft/table").status_code == 404  # a stale table is not the active one
    # Equivalent spellings are one setting: a context size of 8192 or -1 vs 999 GPU layers do not make it stale.
    out, _ = generate_json(
        *calibrated.pair, *THREADS, "--ctx-size", "8192", "--gpu-layers", "999", *PROMPT, env=calibrated.env
    )
    assert out["dynamic_draft"]["reason"] in APPLIED, out["dynamic_draft"].get("stale_message")


def test_j5_table_endpoint_and_force_mode(calibrated: Calibrated) -> None:
    override = {"extra_body": {"speculative": {"source": "draft", "n_max": 3}}}
    with served(*calibrated.pair, *THREADS, "--dd-force", env=calibrated.env) as (url, _):
        table = httpx.get(url + "/dynamic-draft/table").json()
        assert table["table_id"] == calibrated.table_id and table["rows"]
        assert _chat(url, **override)["dynamic_draft"]["reason"] == "forced"
    with served(*calibrated.pair, *THREADS, "--no-dd", env=calibrated.env) as (url, _):
        assert _chat(url)["dynamic_draft"]["reason"] == "disabled"
        assert httpx.get(url + "/dynamic-draft/table").status_code == 404
    with served(*calibrated.pair, *THREADS, env=calibrated.env) as (url, _):
        assert _chat(url, **override)["dynamic_draft"]["reason"] == "override"  # without force, the request wins


# -- the app: the real main window (pytest-qt) on the home the CLI calibrated into ---------------------------------
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
