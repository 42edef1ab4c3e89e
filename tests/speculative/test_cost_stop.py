"""The cost stop's arithmetic: floors from measured verify costs, the monotone envelope, declined drafts, settings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.policy.schema import validate_table_json
from app.runtime.sampling import SamplingParams
from app.speculative.adaptive import AcceptanceModel, AdaptiveLength, CostModel, cost_stop_step
from app.speculative.registry import from_intent
from app.speculative.settings import SpecSettings
from app.speculative.sources import Draft, PromptLookupSource, draft_autoregressive, takes_floors

GREEDY = SamplingParams(temperature=0.0)


def _measured(costs: dict[int, float], draft_ms: float = 0.0) -> CostModel:
    cm = CostModel()
    for rows, ms in costs.items():
        cm.observe(rows - 1, draft_ms * (rows - 1), ms)
    return cm


def test_floors_are_the_extra_row_and_draft_token_in_units_of_one_decode() -> None:
    cm = _measured({1: 10.0, 2: 11.0, 3: 13.0, 4: 16.0}, draft_ms=1.0)
    floors = cm.stop_floors(3)
    assert floors == pytest.approx([(11 - 10 + 1) / 10, (13 - 11 + 1) / 10, (16 - 13 + 1) / 10])


def test_batch_sizes_are_learnt_one_at_a_time() -> None:
    cm = CostModel()
    assert cm.stop_floors(3) == [math.inf] * 3  # not even one row measured: no draft is priced
    cm.observe(0, 0.0, 10.0)
    first = cm.stop_floors(3)
    # The first unmeasured size (2 rows) gets an optimistic estimate (the prior +25 %), the sizes beyond it none.
    assert first[0] == pytest.approx(0.25) and first[1:] == [math.inf, math.inf]
    cm.observe(1, 1.0, 12.0)
    second = cm.stop_floors(3)
    assert second[0] == pytest.approx((12 - 10 + 1) / 10)
    assert math.isfinite(second[1]) and second[2] == math.inf  # 3 rows now estimated from the slope, 4 not yet


def test_a_size_costs_no_more_than_a_larger_measured_one() -> None:
    cm = _measured({1: 10.0, 2: 30.0, 3: 12.0})  # 2 rows read a one-off cost (a kernel build, say)
    assert cm.table() == {1: 10.0, 2: 12.0, 3: 12.0}
    assert cm.verify(1) == 12.0
    assert cm.stop_floors(2) == pytest.approx([0.2, 0.0])


def test_below_the_smallest_measured_size_the_estimate_scales_by_rows() -> None:
    cm = _measured({4: 20.0, 8: 60.0})
    assert cm.verify(0) == pytest.approx(5.0)  # 1 row: a quarter of 4 rows, never the negative slope extrapolation
    assert all(cm.verify(k) >= 0 for k in range(12))


def test_the_step_ceiling_ends_at_the_first_floor_above_one() -> None:
    cpu = _measured({1: 10.0, 2: 20.0, 3: 30.0}, draft_ms=5.0)  # a row costs a decode: no depth pays
    assert cost_stop_step(cpu, 8, 8) == (0, [])
    gpu = _measured({b: 10.0 + 0.5 * b for b in range(1, 10)}, draft_ms=1.0)
    ceiling, floors = cost_stop_step(gpu, 8, 6)
    assert ceiling == 6 and len(floors) == 6 and all(f < 1.0 for f in floors)
    assert cost_stop_step(gpu, 0, 6) == (0, [])  # the controller said plain


def test_declined_positions_are_not_tested() -> None:
    acc = AcceptanceModel()
    before = list(acc.rates)
    acc.observe_declined(2, 2, 6)
    assert acc.seen[:2] == [True, True] and not any(acc.seen[2:8])
    assert acc.rates[0] > before[0] and acc.rates[2:8] == before[2:8]
    ctl = AdaptiveLength(0, 8)
    ctl.observe(0, 0, 0.0, 99.0, declined=8, cost_sample=False)
    assert not any(ctl.acceptance.seen) and ctl.cost.verify_ms == {}  # nothing tested, no one-off cost kept


def _peaked(top: int, p: float, n_vocab: int = 32) -> np.ndarray:
    """Logits whose top-1 has probability ~p among the top 10 (llama.cpp's confidence)."""
    z = np.full(n_vocab, -30.0, dtype=np.float32)
    z[:10] = 0.0
    z[top] = math.log(p * 9 / (1 - p))
    return z


def test_a_model_draft_stops_when_the_chance_of_full_acceptance_falls_below_the_floor() -> None:
    out = Draft("draft")
    draft_autoregressive(
        out, lambda: _peaked(3, 0.8), lambda tok: None, 8, 0, 0.0, GREEDY, np.random.default_rng(0), [0.3] * 8
    )
    # 0.8, 0.64, 0.51, 0.41, 0.33 >= 0.3; 0.26 is not
    assert out.tokens == [3] * 5 and out.declined == 3
    plain = Draft("draft")
    draft_autoregressive(plain, lambda: _peaked(3, 0.8), lambda tok: None, 8, 0, 0.0, GREEDY, np.random.default_rng(0))
    assert len(plain.tokens) == 8 and plain.declined == 0


def test_prompt_lookup_counts_its_tokens_as_certain() -> None:
    src = PromptLookupSource()
    history = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2]
    d = src.propose(history, 6, 0, 0.0, GREEDY, np.random.default_rng(0), floors=[0.1, 0.4, 0.9, 1.2, 0.2, 0.2])
    assert d.tokens == [3, 4, 5] and d.declined == 3
    assert takes_floors(src)

    class OldSource:
        def propose(self, history, n_max, n_min, p_min, sampling, rng):  # type: ignore[no-untyped-def]
            return Draft("old")

    assert not takes_floors(OldSource())


def test_settings_label_and_round_trip() -> None:
    s = SpecSettings("draft", 16, cost_stop=True)
    assert s.label() == "n16,p0,cost"
    assert SpecSettings.from_dict(s.to_dict()) == s
    assert "cost_stop" not in SpecSettings("draft", 4).to_dict()  # records of other settings read as before
    assert from_intent("lookup", cost_stop=True).cost_stop
    with pytest.raises(ValueError, match="cost_stop"):
        SpecSettings("draft", 4, cost_stop="yes")  # type: ignore[arg-type]


def test_table_rows_take_an_optional_cost_stop() -> None:
    import json

    row = {
        "ctx_lo": 0,
        "ctx_hi": 1024,
        "setting": {"source": "draft", "n_max": 16, "n_min": 0, "p_min": 0.0, "adaptive": False},
        "median_tps": 10.0,
        "spread_tps": 0.5,
        "repeats": 2,
        "safe": True,
    }
    fp = {
        "target_sha256": "a",
        "draft_name": None,
        "draft_sha256": None,
        "backend": "cpu",
        "device": "cpu",
        "llama_build": "b1",
        "n_ctx": 4096,
        "n_gpu_layers": 0,
        "n_threads": 2,
        "flash_attn": "off",
    }
    doc = {"schema_version": 1, "table_id": "t", "created_at": "now", "fingerprint": fp, "rows": [row]}
    assert validate_table_json(json.dumps(doc))  # an old table: no cost_stop key
    row["setting"]["cost_stop"] = True  # type: ignore[index]
    assert validate_table_json(json.dumps(doc))["rows"][0]["setting"]["cost_stop"] is True
    row["setting"]["cost_stop"] = "yes"  # type: ignore[index]
    with pytest.raises(ValueError):
        validate_table_json(json.dumps(doc))
