"""What the routes share, kept on `app.state.dynadraft`: the engine, the model's names, metrics, live generations."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.engine.worker import Engine
from app.server.bridge import Generation
from app.server.metrics import Metrics

DDTableProvider = Callable[[], Any]


@dataclass
class ServerState:
    """Everything the routes need, kept on `app.state.dynadraft` (the tests and the runner read it too)."""

    engine: Engine
    model_id: str
    aliases: frozenset[str]
    max_body_bytes: int
    metrics: Metrics = field(default_factory=Metrics)
    dd_table_provider: DDTableProvider | None = None
    # What a request that leaves a sampling field out gets, by llama-server's field names (serve's sampler flags, as
    # llama-server's own command line sets them); empty: the dialects' defaults.
    sampling_defaults: dict[str, Any] = field(default_factory=dict)
    created: int = field(default_factory=lambda: int(time.time()))
    _active: set[Generation] = field(default_factory=set)
    _active_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def sources(self) -> frozenset[str]:
        """The draft sources the loaded model offers (read at load: no call queues behind a generation)."""
        return self.engine.draft_sources()

    def track(self, gen: Generation) -> None:
        with self._active_lock:
            self._active.add(gen)

    def untrack(self, gen: Generation) -> None:
        with self._active_lock:
            self._active.discard(gen)

    def cancel_all(self) -> int:
        """Cancel every queued or running generation (the server is stopping); returns how many."""
        with self._active_lock:
            active = list(self._active)
        for gen in active:
            gen.cancel()
        return len(active)
