"""The session's source memory: open it for this engine, warm-start a request's pool or adaptive length, remember it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.policy.source_memory import MEMORY_FILE, SourceMemoryStore, memory_identity
from app.speculative import memory as sm
from app.speculative.adaptive import AdaptiveLength, SourcePool
from app.speculative.telemetry import SourceStats

if TYPE_CHECKING:
    from app.engine.session import Session

__all__ = ["SourceMemoryStore", "WarmStart", "open_store", "remember", "warm_start"]  # the store: Session's type

log = logging.getLogger(__name__)


def open_store(session: Session, cost_label: str | None = None) -> SourceMemoryStore | None:
    """The memory file beside this pair's calibration tables, keyed by this engine's pair + device; None if off.
    cost_label: the device cost profile the pool optimises for instead of measured ms (its own entry).

    Computing the identity hashes the model files once (cached by app/engine/identity), so it runs lazily, on the
    first request that drafts adaptively, not at load.
    """
    from app.engine.identity import calibration_store, session_fingerprint

    cfg = session.config
    if not cfg.source_memory:
        return None
    try:
        path = calibration_store(cfg.model, cfg.draft).root / MEMORY_FILE
        identity = memory_identity(session_fingerprint(session)) + (f"#cost:{cost_label}" if cost_label else "")
        return SourceMemoryStore(path, identity)
    except Exception as exc:  # the memory is an optimisation: a request must never fail for it
        log.warning("source memory off for this session: %s", exc)
        return None


@dataclass
class WarmStart:
    """What one request started from: its class, the remembered values used per source, and any note."""

    content_class: str
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    note: str | None = None
    chosen: dict[str, int] = field(default_factory=dict)  # with the pool: steps each arm was chosen, this request

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.content_class, "warm": bool(self.sources), "sources": self.sources}
        if self.chosen:
            out["chosen"] = self.chosen
        if self.note:
            out["note"] = self.note
        return out


def warm_start(
    store: SourceMemoryStore | None,
    content_class: str,
    pool: SourcePool | None,
    adaptive: AdaptiveLength | None,
    source: str,
) -> WarmStart | None:
    """Seed the request's pool (every arm) or adaptive length (its one source) from the class's memory."""
    if store is None or (pool is None and adaptive is None):
        return None
    remembered = store.get(content_class)
    ws = WarmStart(content_class, note=store.note)
    if pool is not None:
        ws.sources = sm.warm_start_pool(pool, remembered)
    elif adaptive is not None:
        used = sm.warm_start_length(adaptive, remembered.get(source))
        if used is not None:
            ws.sources = {source: used}
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
            ws.chosen = {name: o.pulls for name, o in outcomes.items() if not o.idle}
        else:
            assert adaptive is not None
            one = sm.length_outcome(adaptive, source, totals)
            outcomes = {source: one} if one is not None else {}
        store.record(ws.content_class, outcomes)
    except Exception as exc:
        log.warning("could not update the source memory: %s", exc)
