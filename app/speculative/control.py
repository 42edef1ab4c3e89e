"""Per-step draft control: which source drafts a step and how deep, and what the step's outcome teaches it.

A run holds one DraftController, made by `controller_for` from the request's settings: Fixed (the settings as they
are, with the cost stop's own costs when it is on), Adaptive (AdaptiveLength: the depth follows measured acceptance)
or Pool (SourcePool: the source too is chosen per step). The session asks `plan` before each step, drafts and
verifies, then hands the outcome to `observe`; the cost stop (adaptive.cost_stop_step) reads the plan's `costs`.
Kept apart from the sources that propose, as vLLM keeps its draft-length policy apart from its proposers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from app.runtime.sampling import SamplingParams
from app.speculative.adaptive import AdaptiveLength, CostModel
from app.speculative.guard import SpeculationGuard
from app.speculative.pool import SourcePool, profile_cost_model
from app.speculative.registry import NONE, POOL, pool_arms
from app.speculative.settings import SpecSettings
from app.speculative.sources import Draft, DraftSource

CatchUp = Callable[[set[str]], "dict[str, float] | None"]  # each available source's one-off ms before its next draft


@dataclass(frozen=True)
class StepView:
    """What a controller may read of the step about to run."""

    history: Sequence[int]  # the prompt and the reply so far (the last token committed, not yet in the KV)
    remaining: int  # tokens still wanted at most
    sources: Mapping[str, DraftSource]  # the session's loaded sources
    sampling: SamplingParams
    rng: np.random.Generator
    catch_up: CatchUp  # (the pool prices a draft model's prefill of what it has not seen)
    disabled: bool = False  # speculation is off for this model (a failed rollback): every step is a plain decode


@dataclass(frozen=True)
class StepPlan:
    """This step's source (NONE: a plain decode) and depth; `peeked`: the proposal a cheap source already made;
    `costs`: what the cost stop reads this step (None: no costs are kept for it)."""

    source: str
    depth: int
    peeked: Draft | None = None
    costs: CostModel | None = None


@dataclass(frozen=True)
class StepOutcome:
    """What the verify found: `accepted` of `drafted`, `committed` tokens (the accepted ones and the target's own),
    the step's ms, tokens the cost stop `declined`; `cost_sample` False: its ms include one-off work; `caught_up`:
    the source first fed history it had not seen (its draft ms are no sample of its ms per token)."""

    drafted: int
    accepted: int
    committed: Sequence[int]
    draft_ms: float
    verify_ms: float
    declined: int
    cost_sample: bool
    caught_up: bool


class DraftController(Protocol):
    """One request's per-step draft control."""

    @property
    def pool(self) -> SourcePool | None:
        """The source memory's pulls (app.engine.memory) read and write this or `adaptive`."""
        ...

    @property
    def adaptive(self) -> AdaptiveLength | None: ...

    @property
    def learns_costs(self) -> bool:
        """It keeps verify costs (measured ones, unless a device profile stands in)."""
        ...

    def plan(self, view: StepView) -> StepPlan: ...

    def observe(self, outcome: StepOutcome) -> None: ...

    def untried(self) -> dict[str, str]:
        """Why each source it never drafted with was left out (never silently unused), in the user's words."""
        ...

    def draft_costs(self) -> dict[str, float]:
        """Each source's measured ms per drafted token, for the next request's pool."""
        ...


class FixedControl:
    """The settings as they are on every step; with the cost stop on, `costs` are what it reads, learnt from the
    steps unless `learns` is off (a device cost profile stands in)."""

    pool: SourcePool | None = None
    adaptive: AdaptiveLength | None = None

    def __init__(self, settings: SpecSettings, costs: CostModel | None = None, learns: bool = True) -> None:
        self.settings, self.costs, self.learns = settings, costs, learns
        self.learns_costs = costs is not None

    def plan(self, view: StepView) -> StepPlan:
        s = self.settings
        return StepPlan(NONE, 0) if s.is_plain or view.disabled else StepPlan(s.source, s.n_max, costs=self.costs)

    def observe(self, outcome: StepOutcome) -> None:
        if self.costs is not None and self.learns and outcome.cost_sample:
            o = outcome
            self.costs.observe(o.drafted, o.draft_ms, o.verify_ms, draft_sample=not o.caught_up)

    def untried(self) -> dict[str, str]:
        return {}

    def draft_costs(self) -> dict[str, float]:
        return {}


class AdaptiveControl:
    """One source at the depth its measured acceptance and costs pay for (0: a plain step)."""

    pool: SourcePool | None = None
    learns_costs = True

    def __init__(self, settings: SpecSettings, length: AdaptiveLength) -> None:
        self.settings, self.adaptive = settings, length

    def plan(self, view: StepView) -> StepPlan:
        if view.disabled:
            return StepPlan(NONE, 0)
        return StepPlan(self.settings.source, self.adaptive.next_length(), costs=self.adaptive.cost)

    def observe(self, outcome: StepOutcome) -> None:
        # A draft that first caught up on steps it sat out is no sample of its ms per token, as in the pool
        # (SourcePool.observe): counted per token, that catch-up made the draft model look several times dearer
        # on this CPU (56-697 ms a token after a request, 23-30 from its steady drafts alone; 108-594 in the
        # source memory after a calibration: bench/results/2026-12-04-first-draft.md), and the memory handed
        # that on to later requests' pools.
        o = outcome
        self.adaptive.observe(
            o.drafted, o.accepted, o.draft_ms, o.verify_ms, o.declined, o.cost_sample, not o.caught_up
        )

    def untried(self) -> dict[str, str]:
        return {}

    def draft_costs(self) -> dict[str, float]:
        return {}


class PoolControl:
    """The source and depth chosen per step among the loaded ones (SourcePool). Cheap peeks (prompt lookup) propose
    first, costing microseconds, and compete only on steps where they have a draft; those not chosen are scored in
    the shadow against what the step committed."""

    adaptive: AdaptiveLength | None = None
    learns_costs = True

    def __init__(self, settings: SpecSettings, pool: SourcePool) -> None:
        self.settings, self.pool = settings, pool
        self.arm = NONE  # this step's choice
        self.peeks: dict[str, list[int]] = {}  # this step's cheap proposals, scored after it

    def plan(self, view: StepView) -> StepPlan:
        if view.disabled:  # the step still counts as the plain arm's
            self.arm, self.peeks = NONE, {}
            return StepPlan(NONE, 0)
        peeks: dict[str, Draft] = {}
        available: set[str] = set()
        for name in self.pool.arms:
            src = view.sources.get(name)
            if src is None:
                continue
            if type(src).cheap_peek:
                peek = src.propose(view.history, self.settings.n_max, 1, 0.0, view.sampling, view.rng)
                if not peek.tokens:
                    continue
                peeks[name] = peek
            available.add(name)
        offers = {n: len(p.tokens) for n, p in peeks.items()}
        self.arm, k = self.pool.choose(available, offers, view.catch_up(available), view.remaining)
        self.peeks = {n: list(p.tokens) for n, p in peeks.items()}  # the chosen one is scored past its draft
        if self.arm == NONE:
            return StepPlan(NONE, 0)
        return StepPlan(self.arm, k, peeks.get(self.arm), self.pool.arms[self.arm].length.cost)

    def observe(self, outcome: StepOutcome) -> None:
        """Score the peeked proposals against what the target committed: those that did not run in the shadow, the
        one that ran past its draft (SourcePool.observe's `peeked`)."""
        o, committed = outcome, list(outcome.committed)
        scored = {name: (len(tokens), _matched(tokens, committed)) for name, tokens in self.peeks.items()}
        own = scored.pop(self.arm, None)
        self.pool.observe(
            self.arm, o.drafted, o.accepted, o.accepted + 1, o.draft_ms, o.verify_ms, o.declined, o.cost_sample, own
        )
        for name, (proposed, matched) in scored.items():
            self.pool.observe_shadow(name, proposed, matched, len(committed))
        self.peeks = {}

    def untried(self) -> dict[str, str]:
        out = {name: catch_up_reason(ms) for name, ms in self.pool.priced_out.items()}
        out |= {name: PASSED_OVER[why] for name, why in self.pool.passed_over.items()}  # disjoint: one reason each
        return {name: why for name, why in out.items() if not self.pool.arms[name].drafted_yet}

    def draft_costs(self) -> dict[str, float]:
        return self.pool.draft_costs()


class GuardedControl:
    """A controller under the in-request guard (app.speculative.guard): the guard may make a step a plain decode;
    every step's outcome goes to both."""

    def __init__(self, inner: DraftController, guard: SpeculationGuard) -> None:
        self.inner, self.guard = inner, guard
        self.pool, self.adaptive, self.learns_costs = inner.pool, inner.adaptive, inner.learns_costs
        self.committed = 0  # reply tokens so far, for the guard's events

    def plan(self, view: StepView) -> StepPlan:
        return self.inner.plan(view) if self.guard.speculate() else StepPlan(NONE, 0)

    def observe(self, outcome: StepOutcome) -> None:
        o = outcome
        self.committed += len(o.committed)
        self.guard.observe(o.drafted, len(o.committed), o.draft_ms, o.verify_ms, o.cost_sample, self.committed)
        self.inner.observe(outcome)

    def untried(self) -> dict[str, str]:
        return self.inner.untried()

    def draft_costs(self) -> dict[str, float]:
        return self.inner.draft_costs()


def guard_record(control: DraftController) -> list[dict[str, Any]] | None:
    """The guard's events for the decision record, where a guard ran and acted (else None)."""
    guard = control.guard if isinstance(control, GuardedControl) else None
    return guard.record() if guard is not None and guard.events else None


# Why the pool never tried a source, by the code its last weighing gave (app.speculative.pool: passed_over).
PASSED_OVER = {
    "no_gain": "not tried: at the measured costs it would not beat plain decoding even with every token accepted",
    "slower": "not tried: at its measured acceptance and costs another choice was faster",
}


def catch_up_reason(ms: float) -> str:
    """Why the pool never tried a source whose catch-up (prefilling what it had not seen) cost `ms`."""
    return f"not tried: prefilling the text it had not seen (~{ms:.0f} ms) would not pay back within max_tokens"


def _matched(proposal: list[int], committed: list[int]) -> int:
    """How many leading tokens of a peeked proposal equal the tokens the step committed."""
    n = min(len(proposal), len(committed))
    return next((i for i in range(n) if proposal[i] != committed[i]), n)


def controller_for(
    settings: SpecSettings,
    sources: Mapping[str, DraftSource],
    verify_ms: dict[int, float],
    draft_ms: dict[str, float],
    step_cost: Callable[[str, int], float] | None,
    max_rows: int,
    guard: bool = False,
) -> DraftController:
    """The run's controller for its settings. `verify_ms`/`draft_ms` are the session's measured tables (shared, so
    what one request learns the next starts from); `step_cost`, a device cost profile standing in for them. `guard`:
    a fixed speculative setting runs under the in-request guard (GuardedControl), seeded with the measured one-row
    decode; the adaptive length and the pool have their own plain arm."""
    if settings.source == POOL:
        pool = SourcePool(
            pool_arms(sources),
            settings.n_min,
            settings.n_max,
            verify_ms=verify_ms,
            step_cost=step_cost,
            draft_ms=draft_ms,
        )
        return PoolControl(settings, pool)
    if settings.adaptive and not settings.is_plain:
        return AdaptiveControl(settings, AdaptiveLength(settings.n_min, settings.n_max, CostModel(verify_ms=verify_ms)))
    fixed = FixedControl(settings)
    if settings.cost_stop and not settings.is_plain:
        costs = profile_cost_model(step_cost, settings.source, max_rows) if step_cost is not None else None
        fixed = FixedControl(settings, costs or CostModel(verify_ms=verify_ms), learns=costs is None)
    if guard and not settings.is_plain:
        return GuardedControl(fixed, SpeculationGuard(plain_ms=verify_ms.get(1)))
    return fixed
