"""The session's source memory: open it for this engine, warm-start a request's pool or adaptive length, remember it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.policy.content_class import class_key
from app.policy.source_memory import MEMORY_FILE, SourceMemoryStore, cost_identity, memory_identity
from app.policy.store import calibration_store
from app.speculative import memory as sm
from app.speculative.adaptive import AdaptiveLength
from app.speculative.pool import SourcePool
from app.speculative.telemetry import SourceStats

if TYPE_CHECKING:
    from app.engine.config import EngineConfig
    from app.policy.fingerprint import Fingerprint

__all__ = ["SourceMemoryStore", "WarmStart", "open_store", "remember", "warm_start"]  # the store: Session's type

log = logging.getLogger(__name__)


def open_store(
    cfg: EngineConfig, fingerprint: Callable[[], Fingerprint], cost_label: str | None = None
) -> SourceMemoryStore | None:
    """The memory file beside this pair's calibration tables, keyed by this engine's pair + device; None if off.
    cost_label: the device cost profile the pool optimises for instead of measured ms (its own entry).

    Computing the identity hashes the model files once (cached by app/engine/identity), so it runs lazily, on the
    first request that drafts adaptively, not at load.
    """
    if not cfg.source_memory:
        return None
    try:
        path = calibration_store(cfg.model, cfg.draft).root / MEMORY_FILE
        fp = fingerprint()
        identity = memory_identity(fp) + (f"#cost:{cost_label}" if cost_label else "")
        # A device profile replaces measured ms (cost_label): nothing measured to keep, so no verify costs then.
        return SourceMemoryStore(path, identity, costs=None if cost_label else cost_identity(fp))
    except Exception as exc:  # the memory is an optimisation: a request must never fail for it
        log.warning("source memory off for this session: %s", exc)
        return None


@dataclass
class WarmStart:
    """What one request started from: its class (and sub-class), the remembered values used per source (each with
    the memory key it came from), and any note."""

    content_class: str
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    note: str | None = None
    chosen: dict[str, int] = field(default_factory=dict)  # with the pool: steps each arm was chosen, this request
    scored: dict[str, int] = field(default_factory=dict)  # with the pool: steps each peeked arm was shadow-scored
    subclass: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """The memory keys of this request, finest first: its sub-class's (when it has one), then its class's."""
        fine = class_key(self.content_class, self.subclass)
        return (fine, self.content_class) if fine != self.content_class else (self.content_class,)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "class": self.content_class,
            "subclass": self.subclass if len(self.keys) > 1 else None,
            "warm": bool(self.sources),
            "sources": self.sources,
        }
        if self.chosen:
            out["chosen"] = self.chosen
        if self.scored:
            out["scored"] = self.scored
        if self.note:
            out["note"] = self.note
        return out


def _remembered(
    store: SourceMemoryStore, keys: tuple[str, ...], usable: Callable[[sm.ArmMemory], bool]
) -> tuple[dict[str, sm.ArmMemory], dict[str, str]]:
    """Per source, the memory of the finest key that has a usable one (a sub-class's own once it has learnt that
    source, its class's until then), and which key that was."""
    memory: dict[str, sm.ArmMemory] = {}
    origin: dict[str, str] = {}
    for key in reversed(keys):  # coarsest first: a finer key's usable memory replaces it
        for name, arm in store.get(key).items():
            if usable(arm):
                memory[name], origin[name] = arm, key
    return memory, origin


def warm_start(
    store: SourceMemoryStore | None,
    content_class: str,
    pool: SourcePool | None,
    adaptive: AdaptiveLength | None,
    source: str,
    subclass: str | None = None,
) -> WarmStart | None:
    """Seed the request's pool (every arm) or adaptive length (its one source) from the memory of its sub-class,
    falling back per source to its class's (a sub-class that has not learnt a source yet starts where the class
    is, not cold)."""
    if store is None or (pool is None and adaptive is None):
        return None
    ws = WarmStart(content_class, note=store.note, subclass=subclass)
    if pool is not None:
        remembered, origin = _remembered(store, ws.keys, lambda m: m.reward is not None)
        ws.sources = sm.warm_start_pool(pool, remembered)
    elif adaptive is not None:
        remembered, origin = _remembered(store, ws.keys, lambda m: m.requests > 0)
        used = sm.warm_start_length(adaptive, remembered.get(source))
        if used is not None:
            ws.sources = {source: used}
    for name, used_values in ws.sources.items():
        used_values["from"] = origin[name]
    return ws


def remember(
    store: SourceMemoryStore | None,
    ws: WarmStart | None,
    pool: SourcePool | None,
    adaptive: AdaptiveLength | None,
    source: str,
    stats: dict[str, SourceStats],
) -> None:
    """Blend the finished request into the memory (throttled write); failures are logged, never raised."""
    if store is None or ws is None:
        return
    totals = {name: (s.drafted, s.accepted, s.draft_ms + s.verify_ms) for name, s in stats.items()}
    try:
        if pool is not None:
            outcomes = sm.pool_outcomes(pool, ws.sources, totals)
            ws.chosen = {name: o.pulls for name, o in outcomes.items() if not o.idle and o.pulls}
            ws.scored = {name: arm.shadowed for name, arm in pool.arms.items() if arm.shadowed}
        else:
            assert adaptive is not None
            one = sm.length_outcome(adaptive, source, totals)
            outcomes = {source: one} if one is not None else {}
        # Under both keys: the sub-class learns its own, and the class's memory stays what every request of the
        # class taught (the start of a sub-class not seen yet, and of a request with no sub-class).
        store.record(ws.keys, outcomes)
    except Exception as exc:
        log.warning("could not update the source memory: %s", exc)


def seed_verify_costs(store: SourceMemoryStore | None, verify_ms: dict[int, float]) -> int:
    """The verify costs the memory kept into a session's table, where it has not measured them itself; returns how
    many batch sizes the memory had."""
    if store is None:
        return 0
    saved = store.verify_costs()
    for b, ms in saved.items():
        verify_ms.setdefault(b, ms)
    if saved:
        log.info("verify costs of %d batch sizes from the source memory (%s)", len(saved), store.path)
    return len(saved)
