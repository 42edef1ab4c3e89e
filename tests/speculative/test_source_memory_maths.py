"""The source memory's maths: the decay's half-life, following a change of workload, and the warm start's caps."""

from __future__ import annotations

import pytest

from app.speculative.adaptive import WARMUP_PULLS
from app.speculative.memory import (
    BLEND_WEIGHT,
    HALF_LIFE_REQUESTS,
    ArmMemory,
    ArmOutcome,
    blend,
    pool_outcomes,
    warm_start_pool,
)
from app.speculative.pool import SourcePool


def _outcome(reward: float, acceptance: list[float] | None = None, pulls: int = 40) -> ArmOutcome:
    return ArmOutcome(reward, pulls, acceptance or [], None)


def test_half_life_is_stated_in_requests() -> None:
    mem = blend(None, _outcome(1.0))
    assert mem.reward == 1.0
    for _ in range(round(HALF_LIFE_REQUESTS * 2)):  # two half-lives (3 requests) of a new behaviour
        mem = blend(mem, _outcome(0.0))
    assert mem.reward == pytest.approx(0.25)
    assert 0.3 < BLEND_WEIGHT < 0.45  # one odd request moves the memory only part of the way


def test_a_change_of_workload_is_followed_within_four_requests() -> None:
    """Copy-edit (lookup wins) then fresh code (plain wins): after how many requests does the warm start agree?"""
    memory: dict[str, ArmMemory] = {}
    for _ in range(6):  # a long copy-edit history
        for name, reward in (("lookup", 0.030), ("none", 0.020)):
            memory[name] = blend(memory.get(name), _outcome(reward, [0.9, 0.85] if name == "lookup" else []))
    followed = None
    for n in range(1, 7):
        for name, reward in (("lookup", 0.012), ("none", 0.020)):
            memory[name] = blend(memory[name], _outcome(reward, [0.3, 0.2] if name == "lookup" else []))
        lookup = memory["lookup"].reward or 0.0
        if followed is None and lookup < (memory["none"].reward or 0.0):
            followed = n
    assert followed is not None and followed <= 2  # the ranking flips within two requests
    assert memory["lookup"].acceptance[0] < 0.35  # and after six the acceptance prior is the new behaviour's


def test_warm_start_seeds_remembered_arms_and_leaves_others_to_their_warm_up() -> None:
    pool = SourcePool(["lookup", "draft"], 0, 8)
    remembered = {
        "lookup": ArmMemory(reward=0.05, pulls=30.0, acceptance=[0.9, 0.8, 0.7], requests=4),
        "none": ArmMemory(reward=0.02, pulls=1.2, requests=4),
        "mtp": ArmMemory(reward=0.9, pulls=9.0, requests=1),  # a source this pool lacks: ignored
    }
    used = warm_start_pool(pool, remembered)
    assert set(used) == {"lookup", "none"}
    assert pool.arms["lookup"].pulls == WARMUP_PULLS and used["lookup"]["pulls"] == WARMUP_PULLS  # capped
    assert pool.arms["none"].pulls == 1
    assert pool.arms["lookup"].length.acceptance.rate(1) == 0.8 and pool.arms["lookup"].reward == 0.05
    assert pool.total == WARMUP_PULLS + 1
    # The unremembered arm still gets its warm-up pulls first, and a remembered one needs none.
    assert [pool.choose()[0] for _ in range(WARMUP_PULLS)] == ["draft"] * WARMUP_PULLS
    for _ in range(WARMUP_PULLS):
        pool.observe("draft", 4, 1, 2, 5.0, 40.0)
    assert pool.choose()[0] == "none"  # remembered with 1 pull only: it gets the rest of its warm-up
    # Only the pulls made in this request count as new evidence.
    pool.observe("lookup", 4, 4, 5, 0.1, 60.0)
    outcomes = pool_outcomes(pool, used, {"lookup": (4, 4, 60.1)})
    assert outcomes["lookup"].pulls == 1 and outcomes["lookup"].drafted == 4 and outcomes["draft"].pulls == WARMUP_PULLS


def test_an_arm_the_pool_stops_choosing_gets_its_warm_up_back() -> None:
    """Idle requests decay only the evidence: after three, the warm start gives the arm its full warm-up again."""
    mem = blend(None, _outcome(0.01, [0.4]))
    warmups = []
    for _ in range(4):
        pool = SourcePool(["lookup"], 0, 8)
        used = warm_start_pool(pool, {"lookup": mem})
        warmups.append(WARMUP_PULLS - pool.arms["lookup"].pulls)
        (idle,) = pool_outcomes(pool, used, {}).values()  # this request never chose it
        assert idle.idle
        mem = blend(mem, idle)
    assert warmups == [0, 2, 2, WARMUP_PULLS]
    assert mem.reward == 0.01 and mem.acceptance == [0.4] and mem.requests == 1  # estimates kept


def test_adaptive_only_outcomes_keep_the_bandit_reward() -> None:
    mem = blend(None, _outcome(0.04, [0.5]))
    mem = blend(mem, ArmOutcome(None, 0, [0.9], None, drafted=10, accepted=9, ms=100.0))
    assert mem.reward == 0.04 and mem.pulls == 40.0
    assert mem.acceptance[0] == pytest.approx(0.5 + BLEND_WEIGHT * 0.4) and mem.drafted == 10


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"reward": -1},
        {"reward": 1, "pulls": 1, "acceptance": [2.0]},
        {"reward": True, "pulls": 1, "acceptance": []},
    ],
)
def test_a_damaged_entry_is_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        ArmMemory.from_dict(bad)


def test_round_trip() -> None:
    m = ArmMemory(0.03, 12.5, [0.9, 0.5], 0.2, 100, 70, 900.0, 3)
    assert ArmMemory.from_dict(m.to_dict()) == m
