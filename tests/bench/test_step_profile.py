"""bench/gpu/mtp_measure.step_profile: a run with one stall reads differently from a uniformly slow one."""

from __future__ import annotations

from app.engine.types import StepEvent
from bench.gpu.mtp_measure import step_profile


def _steps(verify_ms: list[float], gaps_ms: list[float]) -> list[StepEvent]:
    t, out = 0.0, []
    for i, (v, g) in enumerate(zip(verify_ms, gaps_ms, strict=True)):
        t += g / 1000.0
        out.append(StepEvent(i, "none", 0, 0, 0, 1, 0.0, v, t, i + 1))
    return out


def test_a_stall_shows_in_the_gaps_and_the_decode_share_not_in_the_median() -> None:
    uniform = step_profile(_steps([10.0] * 20, [10.0] * 20), predicted_ms=200.0)
    stalled = step_profile(_steps([5.0] * 20, [5.0] * 19 + [105.0]), predicted_ms=200.0)
    assert uniform["n"] == stalled["n"] == 20
    assert uniform["verify_ms_p10_p50_p90_max"] == [10.0, 10.0, 10.0, 10.0]
    assert uniform["verify_share"] == 1.0 and stalled["verify_share"] == 0.5  # half the time outside the decodes
    assert stalled["gap_ms_p50_p90_max"][0] == 5.0 and stalled["gap_ms_p50_p90_max"][2] == 105.0
    assert step_profile([], 0.0) == {}
