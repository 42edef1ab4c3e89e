"""Source memory: what each draft source earned on earlier requests of a content class, and the warm start it gives.

A request's SourcePool (or AdaptiveLength) starts from the remembered state instead of from nothing, and at the end
of the request its final state is blended back in. The maths is pure; persistence is app/policy/source_memory.py.

Decay: each finished request moves the memory a fraction BLEND_WEIGHT of the way to that request's end state, so
an old request's influence halves every HALF_LIFE_REQUESTS requests. With a half-life of 1.5 requests, after 3
requests of a new behaviour the old one keeps 25 % of the weight and after 4 about 16 %: the warm start follows a
change of workload within a few requests, and one odd request moves it only part of the way. Because the pool's
own estimates are EMAs that start from the warm values, a request that barely used a source (few pulls) moves that
source's memory little: its end state is still mostly the warm start (evidence-weighted for free).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from app.speculative.adaptive import MAX_POSITIONS, WARMUP_PULLS, AdaptiveLength
from app.speculative.pool import SourcePool

HALF_LIFE_REQUESTS = 1.5
BLEND_WEIGHT = 1.0 - 0.5 ** (1.0 / HALF_LIFE_REQUESTS)  # ~0.37
# A remembered arm starts with at most this many pulls: past its warm-up; the pool's probes still retry a source the
# memory ranks low (a memory must never freeze exploration).
WARM_PULLS_CAP = WARMUP_PULLS


@dataclass
class ArmMemory:
    """One source's remembered state for one content class.

    reward: tokens/ms when chosen (reported; the pool chooses from acceptance and costs);
    pulls: decayed count of steps it was chosen;
    acceptance: per-position conditional acceptance EMAs (only positions ever tested, shallowest first);
    draft_ms_per_token: its measured drafting cost; drafted/accepted/ms/requests: plain totals (never decayed).
    """

    reward: float | None = None  # None: only ever used without the pool (adaptive length alone)
    pulls: float = 0.0
    acceptance: list[float] = field(default_factory=list)
    draft_ms_per_token: float | None = None
    drafted: int = 0
    accepted: int = 0
    ms: float = 0.0
    requests: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "reward": None if self.reward is None else round(self.reward, 6),
            "pulls": round(self.pulls, 3),
            "acceptance": [round(a, 4) for a in self.acceptance],
            "draft_ms_per_token": None if self.draft_ms_per_token is None else round(self.draft_ms_per_token, 4),
            "drafted": self.drafted,
            "accepted": self.accepted,
            "ms": round(self.ms, 2),
            "requests": self.requests,
        }

    @classmethod
    def from_dict(cls, data: Any) -> ArmMemory:
        """Parse strictly (the file may be damaged or hand-edited): raises ValueError on anything unexpected."""
        if not isinstance(data, dict):
            raise ValueError("a source's memory must be an object")

        def num(name: str, lo: float = 0.0, hi: float = math.inf) -> float:
            v = data.get(name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not lo <= v <= hi:
                raise ValueError(f"{name} must be a number in [{lo}, {hi}]")
            return float(v)

        acc = data.get("acceptance")
        if not isinstance(acc, list) or len(acc) > MAX_POSITIONS:
            raise ValueError(f"acceptance must be a list of at most {MAX_POSITIONS} rates")
        rates = []
        for a in acc:
            if isinstance(a, bool) or not isinstance(a, int | float) or not 0.0 <= a <= 1.0:
                raise ValueError("acceptance rates must be in [0, 1]")
            rates.append(float(a))
        dmt = data.get("draft_ms_per_token")
        return cls(
            reward=None if data.get("reward") is None else num("reward"),
            pulls=num("pulls"),
            acceptance=rates,
            draft_ms_per_token=None if dmt is None else num("draft_ms_per_token"),
            drafted=int(num("drafted")),
            accepted=int(num("accepted")),
            ms=num("ms"),
            requests=int(num("requests")),
        )


@dataclass(frozen=True)
class ArmOutcome:
    """One source's state at the end of a request: its estimates then, and what it did in this request alone."""

    reward: float | None  # None: adaptive length alone (no pool), which leaves the reward and pulls as they were
    pulls: int  # pulls made in this request (warm-start pulls excluded)
    acceptance: list[float]  # per-position EMAs of the positions tested so far (warm-started ones included)
    draft_ms_per_token: float | None
    drafted: int = 0
    accepted: int = 0
    ms: float = 0.0
    idle: bool = False  # in the pool but never chosen: only its evidence count decays (see blend)


def blend(old: ArmMemory | None, new: ArmOutcome, weight: float = BLEND_WEIGHT) -> ArmMemory:
    """The memory after one more request: each estimate moves `weight` of the way to the request's end value.

    An idle outcome (the arm was offered but never chosen) keeps the estimates and decays only the (capped) pulls, so
    an arm the memory ranks low gets part of its warm-up back on the next request and all of it after three idle
    requests: what it did long ago is re-measured
    instead of believed forever (prompt lookup on fresh code, say, that is rarely even available).
    """
    if new.idle:
        if old is None:
            return ArmMemory()
        return replace(old, pulls=min(old.pulls, WARM_PULLS_CAP) * (1.0 - weight))
    if old is None or old.requests == 0:
        return ArmMemory(
            new.reward,
            float(new.pulls),
            list(new.acceptance),
            new.draft_ms_per_token,
            new.drafted,
            new.accepted,
            new.ms,
            1,
        )

    def mix(a: float, b: float) -> float:
        return a + weight * (b - a)

    n = max(len(old.acceptance), len(new.acceptance))
    acc = []
    for i in range(n):
        if i < len(old.acceptance) and i < len(new.acceptance):
            acc.append(mix(old.acceptance[i], new.acceptance[i]))
        else:
            acc.append(old.acceptance[i] if i < len(old.acceptance) else new.acceptance[i])
    dmt = old.draft_ms_per_token
    if new.draft_ms_per_token is not None:
        dmt = new.draft_ms_per_token if dmt is None else mix(dmt, new.draft_ms_per_token)
    reward, pulls = old.reward, old.pulls
    if new.reward is not None:
        reward = new.reward if reward is None else mix(reward, new.reward)
        pulls = old.pulls * (1.0 - weight) + new.pulls  # decayed evidence count
    return ArmMemory(
        reward=reward,
        pulls=pulls,
        acceptance=acc,
        draft_ms_per_token=dmt,
        drafted=old.drafted + new.drafted,
        accepted=old.accepted + new.accepted,
        ms=old.ms + new.ms,
        requests=old.requests + 1,
    )


def _seed_length(length: AdaptiveLength, mem: ArmMemory) -> None:
    for i, rate in enumerate(mem.acceptance[:MAX_POSITIONS]):
        length.acceptance.rates[i] = rate
        length.acceptance.seen[i] = True
    if mem.draft_ms_per_token is not None and length.cost.draft_ms_per_token is None:
        length.cost.draft_ms_per_token = mem.draft_ms_per_token


def warm_pulls(mem: ArmMemory) -> int:
    return min(WARM_PULLS_CAP, int(mem.pulls))


def warm_start_pool(pool: SourcePool, memory: dict[str, ArmMemory]) -> dict[str, dict[str, Any]]:
    """Seed the pool's arms from memory (reward, capped pulls, per-position acceptance); returns what was used.

    An arm without memory keeps its cold start and so still gets its warm-up pulls.
    """
    used: dict[str, dict[str, Any]] = {}
    for name, arm in pool.arms.items():
        mem = memory.get(name)
        if mem is None or mem.reward is None:  # never chosen in a pool: no pool state to start from
            continue
        pulls = warm_pulls(mem)
        arm.reward = mem.reward
        arm.pulls = pulls
        pool.total += pulls
        _seed_length(arm.length, mem)
        used[name] = _used(mem, pulls)
    return used


def warm_start_length(length: AdaptiveLength, mem: ArmMemory | None) -> dict[str, Any] | None:
    """Seed adaptive length (no pool) with the source's remembered per-position acceptance."""
    if mem is None or mem.requests == 0:
        return None
    _seed_length(length, mem)
    return _used(mem, None)


def _used(mem: ArmMemory, pulls: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "reward": None if mem.reward is None else round(mem.reward, 6),
        "acceptance": [round(a, 4) for a in mem.acceptance],
        "requests": mem.requests,
    }
    if pulls is not None:
        out["pulls"] = pulls
    return out


def _tested(length: AdaptiveLength) -> list[float]:
    acc = length.acceptance
    n = 0
    while n < MAX_POSITIONS and acc.seen[n]:
        n += 1
    return acc.rates[:n]


Totals = dict[str, tuple[int, int, float]]  # source -> (drafted, accepted, ms) in this request


def pool_outcomes(pool: SourcePool, warm: dict[str, dict[str, Any]], totals: Totals) -> dict[str, ArmOutcome]:
    """Each arm the request chose at least once, as an outcome to blend; a remembered arm it never chose, as idle."""
    out = {}
    for name, arm in pool.arms.items():
        pulls = arm.pulls - int(warm.get(name, {}).get("pulls", 0))
        if pulls <= 0:
            if arm.shadowed:  # never chosen, but scored in the shadow: its acceptance is news, its reward is not
                out[name] = ArmOutcome(None, 0, _tested(arm.length), None)
            elif name in warm:
                out[name] = ArmOutcome(None, 0, [], None, idle=True)
            continue
        d, a, ms = totals.get(name, (0, 0, 0.0))
        out[name] = ArmOutcome(arm.reward, pulls, _tested(arm.length), arm.length.cost.draft_ms_per_token, d, a, ms)
    return out


def length_outcome(length: AdaptiveLength, source: str, totals: Totals) -> ArmOutcome | None:
    """Adaptive length's end state for its one source (no pool: reward and pulls stay as the pool left them)."""
    if source not in totals:
        return None
    d, a, ms = totals[source]
    return ArmOutcome(None, 0, _tested(length), length.cost.draft_ms_per_token, d, a, ms)
