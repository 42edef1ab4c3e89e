"""J2 (calibrate, then generate and serve with the same defaults apply the table), J3 (a changed setting is reported
as a stale table naming the field) and J5 (the table endpoint and force mode of `dynadraft serve`)."""

from __future__ import annotations

import httpx
import openai

from tests.journeys.conftest import Calibrated
from tests.journeys.helpers import THREADS, generate_json, served

PROMPT = ("--prompt", "Hi", "--max-tokens", "4", "--temperature", "0")
APPLIED = ("table_row", "fallback_static", "fallback_plain", "catch_up")


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
