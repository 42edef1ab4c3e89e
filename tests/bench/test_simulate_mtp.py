"""bench/lib/simulate_mtp.py's snapshot rollback model: a step's tokens and cost, and which cost files offer it."""

from __future__ import annotations

import math

from bench.lib import simulate_mtp as sim


def _row(rollback: bool) -> dict:  # type: ignore[type-arg]
    row = {
        "draft_ms": {str(n): 1.0 * n for n in sim.DEPTHS},
        "verify_ms": {str(b): 10.0 + b for b in range(1, 10)},
        "full_checkpoint": {"save_ms": 100.0, "load_ms": 50.0},
        "partial_save_ms": 40.0,
        "partial_load_ms": 5.0,
    }
    if rollback:
        row["rollback_ms"] = {str(n): 0.5 for n in sim.DEPTHS}
    return row


def test_a_snapshot_step_costs_draft_verify_and_a_rollback_only_when_something_is_rejected() -> None:
    toks, ms = sim.step(3, _row(True), 1.0, "snapshot")
    p = [1.0]
    for i in (1, 2, 3):
        p.append(p[-1] * sim.accept(i))
    assert math.isclose(toks, sum(p))
    assert math.isclose(ms, 3.0 + 14.0 + (1 - p[3]) * 0.5)  # draft(3) + verify(4) + P(a rejection) x rollback
    # Every draft accepted: no rollback is paid; the checkpoint models pay their save on every step.
    assert math.isclose(sim.step(3, _row(True), 10.0, "snapshot")[1], 17.0)
    assert sim.step(3, _row(True), 1.0, "full")[1] > ms + 100.0


def test_the_snapshot_model_is_offered_only_where_every_context_measured_it() -> None:
    assert sim.rollback_models({"contexts": {"2048": _row(True), "8192": _row(True)}})[-1] == "snapshot"
    assert "snapshot" not in sim.rollback_models({"contexts": {"2048": _row(True), "8192": _row(False)}})
    rows = sim.simulate({"contexts": {"2048": _row(True)}})["rows"]
    snap = [r for r in rows if r["rollback"] == "snapshot" and r["scenario"] == "flat"]
    assert len(snap) == 1 and snap[0]["dd_tok_s"] >= snap[0]["fixed_n2_tok_s"]  # DD picks the best depth in-sample


def test_the_cost_check_reads_both_mtpbench_formats_with_the_engine_s_rollback() -> None:
    costs = {"contexts": {"2048": _row(True)}}
    old = {"context": 2048, "setting": "mtp n2,p0", "engine": {"tok_s": 80.0, "draft_n": 100, "draft_n_accepted": 0}}
    runs = [{"tok_s": 80.0, "draft_n": 50, "draft_n_accepted": 0}] * 2
    new = {"context": 2048, "setting": "mtp n2,p0", "engine": {"tok_s": 80.0, "runs": runs}}
    checks = sim.check_bench(costs, {"runs": [old, new, {"setting": "off", "context": 2048, "engine": {}}]})
    assert [c["rollback"] for c in checks] == ["snapshot", "snapshot"]
    # Nothing accepted: one token per draft(2) + verify(3) + rollback = 2 + 13 + 0.5 ms.
    assert all(math.isclose(c["predicted_tok_s"], round(1000.0 / 15.5, 2)) for c in checks)
    assert sim.check_bench({"contexts": {"2048": _row(False)}}, {"runs": [old]})[0]["rollback"] == "full"
