"""bench/dynamic_draft/bench_inrequest.py on the recorded class traces: the per-step ceiling bounds every policy, and the simulated
pool requests go through the engine's warm start and memory (sub-class key first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.dynamic_draft import bench_inrequest as bi
from bench.lib.simulate import CostCurve, Device, simulate

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
TRACES = {t["name"]: t for t in json.loads((RESULTS / "2026-12-01-classes-v3-traces.json").read_text())["traces"]}
_COSTS = json.loads((RESULTS / "2026-11-29-h200-vulkan-fa-costs.json").read_text())["models"]
DEV = Device(CostCurve(_COSTS["q32b+fa"]["ms"]), CostCurve(_COSTS["q05b+fa"]["ms"]))


@pytest.mark.parametrize("name", ["edit-rename", "edit-param"])
def test_the_per_step_ceiling_is_at_least_every_static_setting_and_the_pool(name: str, tmp_path: Path) -> None:
    from app.calibration.runner import candidates
    from app.policy.source_memory import SourceMemoryStore

    tr = TRACES[name]
    n, best_ms = bi.ceiling(tr, 2048, DEV)
    assert n == len(tr["output"])
    for s in candidates(("draft", "lookup"), "quick"):
        assert n / best_ms * 1000.0 >= simulate([tr], s, 2048, DEV)["tok_s"] - 1e-9, s.label()
    store = SourceMemoryStore(tmp_path / "m.json", "sim")
    tokens, ms = bi.serve(store, tr, ("copy_edit", "near_copy"), 2048, DEV, {})
    assert tokens == n and ms >= best_ms


def test_a_simulated_request_learns_under_its_subclass_and_the_next_starts_from_it(tmp_path: Path) -> None:
    from app.engine import memory
    from app.policy.source_memory import SourceMemoryStore
    from app.speculative.pool import SourcePool

    store = SourceMemoryStore(tmp_path / "m.json", "sim")
    bi.serve(store, TRACES["calib-near_copy"], ("copy_edit", "near_copy"), 2048, DEV, {})
    assert store.get("copy_edit/near_copy") == store.get("copy_edit") != {}
    ws = memory.warm_start(store, "copy_edit", SourcePool(["draft", "lookup"], 0, 8), None, "pool", "near_copy")
    assert ws is not None and ws.sources and {u["from"] for u in ws.sources.values()} == {"copy_edit/near_copy"}


def test_the_lookup_first_rule_is_bounded_by_the_ceiling_and_is_the_draft_model_without_lookup() -> None:

    tr = TRACES["edit-rename"]
    n, ms = bi.lookup_first(tr, 2048, DEV)
    assert n == len(tr["output"]) and ms >= bi.ceiling(tr, 2048, DEV)[1]
    # A trace on which lookup never proposes is the draft model's n4,p0 step for step.
    dry = dict(tr, lookup=[[0, 0] for _ in tr["lookup"]])
    assert (
        abs(n / bi.lookup_first(dry, 2048, DEV)[1] * 1000.0 - simulate([dry], bi.LOOKUP_FIRST[1], 2048, DEV)["tok_s"])
        < 1e-6
    )


def test_a_warm_session_verify_table_keeps_the_cost_stop_below_the_cliff_and_is_not_changed() -> None:
    """The engine's verify cost table is one per session (Session._verify_ms): after earlier requests every batch
    size up to the H200's 8-to-10-row cliff is measured, so a short prompt's cost stop does not pay for finding the
    cliff again, as a table warmed on that prompt alone does."""
    from app.speculative.settings import SpecSettings
    from bench.lib.simulate import replay_controlled

    s = SpecSettings("draft", 16, 0, 0.0, cost_stop=True)
    tr = TRACES["edit-short"]
    alone: dict[int, float] = {}
    replay_controlled(tr, s, 512, DEV, alone)
    assert max(d for _, d, _, _ in replay_controlled(tr, s, 512, DEV, alone)) >= 8  # 9 rows: past the cliff
    session: dict[int, float] = {}
    for t in TRACES.values():
        replay_controlled(t, s, 512, DEV, session)
    before = dict(session)
    warm = simulate([tr], s, 512, DEV, session)
    assert session == before
    assert warm["tok_s"] > simulate([tr], s, 512, DEV)["tok_s"] * 1.2
    assert max(d for _, d, _, _ in replay_controlled(tr, s, 512, DEV, dict(session))) <= 7


def test_a_first_turn_charges_the_draft_models_catch_up_and_the_pool_weighs_it(tmp_path: Path) -> None:
    """First turns (the draft model has not seen the prompt): a fixed draft setting pays the whole prompt's prefill
    once, as predicted by the catch-up rate; lookup pays nothing; the pool, which weighs the catch-up against the rest
    of the reply, does not fall below plain at 32k where the fixed draft setting does."""
    from dataclasses import replace

    from app.policy.source_memory import SourceMemoryStore
    from app.speculative.settings import PLAIN, SpecSettings
    from bench.lib.simulate import catch_up_rate, replay

    first = replace(DEV, draft_prefill=catch_up_rate(_COSTS["q05b+fa"]))
    tr = TRACES["code-lru"]
    n4 = SpecSettings("draft", 4, 0, 0.0)
    for ctx in (2048, 32768):
        warm_ms = len(tr["output"]) / simulate([tr], n4, ctx, first)["tok_s"] * 1000.0
        cold_ms = len(tr["output"]) / simulate([tr], n4, ctx, first, first_turn=True)["tok_s"] * 1000.0
        expected = ctx * first.draft_prefill(ctx)  # type: ignore[misc]
        assert abs(cold_ms - warm_ms - expected) < 0.05 * expected + 5.0, (ctx, cold_ms, warm_ms, expected)
        assert replay(tr, n4, ctx)[0][3] == ctx + 1  # the first step decodes the prompt into the draft, then drafts
    lookup = SpecSettings("lookup", 8)
    assert simulate([tr], lookup, 32768, first, first_turn=True) == simulate([tr], lookup, 32768, first)
    plain = simulate([tr], PLAIN, 32768, first)["tok_s"]
    assert simulate([tr], n4, 32768, first, first_turn=True)["tok_s"] < 0.8 * plain
    n, ms = bi.serve(SourceMemoryStore(tmp_path / "m.json", "sim"), tr, ("code", None), 32768, first, {}, True)
    assert n / ms * 1000.0 >= 0.97 * plain
