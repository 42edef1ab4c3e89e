"""Per-step speculation telemetry in numpy ring buffers, fed from the engine thread and read by the plot timer."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field

import numpy as np

from app.engine.types import DoneEvent, Event, StepEvent

ROLLING_STEPS = 16  # acceptance and tok/s are averaged over this many steps, so single steps don't make noise


@dataclass(frozen=True)
class Snapshot:
    """Copies of the buffered series in step order (oldest first) and the request boundaries inside them."""

    x: np.ndarray  # global step number
    acceptance: np.ndarray  # rolling accepted/drafted (NaN where nothing was drafted in the window)
    depth: np.ndarray  # draft depth allowed this step
    drafted: np.ndarray
    accepted: np.ndarray
    tps: np.ndarray  # rolling tokens per second
    boundaries: tuple[float, ...]  # x of the first step of each request
    # Per draft source: its own rolling acceptance over its last drafting steps, carried forward on other sources'
    # steps (NaN before the source first drafts in a request), so each source reads as one line.
    by_source: dict[str, np.ndarray] = field(default_factory=dict)


class StepRing:
    """Fixed-size numpy ring buffers of per-step series; one writer (`ingest`) and one reader (`snapshot`).

    The engine thread only appends to a deque (`tap`, O(1) and lock-free in CPython); the GUI timer moves pending
    steps into the arrays (`drain`) at its own rate, so the engine never waits on numpy or on the GUI.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._pending: collections.deque[StepEvent | None] = collections.deque()
        self._lock = threading.Lock()  # only between drain/snapshot callers, never taken by the engine thread
        self._cols = {
            name: np.full(capacity, np.nan, dtype=np.float64)
            for name in ("x", "acceptance", "depth", "drafted", "accepted", "tps")
        }
        self._n = 0  # total steps ever ingested
        self._boundaries: collections.deque[float] = collections.deque()
        self._win_drafted: collections.deque[int] = collections.deque(maxlen=ROLLING_STEPS)
        self._win_accepted: collections.deque[int] = collections.deque(maxlen=ROLLING_STEPS)
        self._win_emitted: collections.deque[int] = collections.deque(maxlen=ROLLING_STEPS)
        self._win_dt: collections.deque[float] = collections.deque(maxlen=ROLLING_STEPS)
        self._src_cols: dict[str, np.ndarray] = {}
        self._src_win: dict[str, tuple[collections.deque[int], collections.deque[int]]] = {}
        self._last_t: float | None = None
        self._new_request = True
        self.requests = 0

    # -- writer side (any thread) ---------------------------------------------------------------------------------
    def tap(self, ev: Event) -> None:
        """Engine.on_event hook: keep StepEvents, note request ends; must stay cheap (it runs on the engine thread)."""
        if isinstance(ev, StepEvent):
            self._pending.append(ev)
        elif isinstance(ev, DoneEvent):
            self._pending.append(None)

    # -- reader side (GUI timer) ----------------------------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        return self._n

    @property
    def pending(self) -> int:
        return len(self._pending)

    def drain(self) -> int:
        """Move pending steps into the ring buffers; returns how many steps were added."""
        added = 0
        with self._lock:
            while self._pending:
                ev = self._pending.popleft()
                if ev is None:
                    self._new_request = True
                    continue
                self._ingest(ev)
                added += 1
        return added

    def _ingest(self, ev: StepEvent) -> None:
        if self._new_request or ev.index == 1:
            # A new request: rolling windows restart so one request's rate doesn't leak into the next one's.
            self._new_request = False
            self.requests += 1
            self._boundaries.append(float(self._n))
            for w in (self._win_drafted, self._win_accepted, self._win_emitted, self._win_dt):
                w.clear()
            self._src_win.clear()
            self._last_t = None
        dt = (ev.t - self._last_t) if self._last_t is not None else (ev.draft_ms + ev.verify_ms) / 1000.0
        self._last_t = ev.t
        self._win_drafted.append(ev.drafted)
        self._win_accepted.append(ev.accepted)
        self._win_emitted.append(ev.emitted)
        self._win_dt.append(max(dt, 1e-6))
        drafted = sum(self._win_drafted)
        i = self._n % self.capacity
        c = self._cols
        c["x"][i] = self._n
        c["acceptance"][i] = sum(self._win_accepted) / drafted if drafted else np.nan
        c["depth"][i] = ev.depth
        c["drafted"][i] = ev.drafted
        c["accepted"][i] = ev.accepted
        c["tps"][i] = sum(self._win_emitted) / sum(self._win_dt)
        self._ingest_source(i, ev)
        self._n += 1
        lo = self._n - self.capacity
        while self._boundaries and self._boundaries[0] < lo:
            self._boundaries.popleft()

    def _ingest_source(self, i: int, ev: StepEvent) -> None:
        if ev.drafted > 0:
            if ev.source not in self._src_cols:
                self._src_cols[ev.source] = np.full(self.capacity, np.nan, dtype=np.float64)
            win = self._src_win.setdefault(
                ev.source, (collections.deque(maxlen=ROLLING_STEPS), collections.deque(maxlen=ROLLING_STEPS))
            )
            win[0].append(ev.drafted)
            win[1].append(ev.accepted)
        for name, col in self._src_cols.items():
            w = self._src_win.get(name)
            col[i] = sum(w[1]) / sum(w[0]) if w else np.nan

    def snapshot(self) -> Snapshot:
        with self._lock:
            n = min(self._n, self.capacity)
            start = self._n % self.capacity if self._n > self.capacity else 0
            order = (np.arange(n) + start) % self.capacity
            c = self._cols
            return Snapshot(
                x=c["x"][order],
                acceptance=c["acceptance"][order],
                depth=c["depth"][order],
                drafted=c["drafted"][order],
                accepted=c["accepted"][order],
                tps=c["tps"][order],
                boundaries=tuple(self._boundaries),
                by_source={name: col[order] for name, col in self._src_cols.items()},
            )

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()
            for a in self._cols.values():
                a.fill(np.nan)
            self._src_cols.clear()
            self._src_win.clear()
            self._n = 0
            self._boundaries.clear()
            self._new_request = True
            self.requests = 0
