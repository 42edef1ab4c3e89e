"""One engine request seen from the event loop: the engine thread's events arrive through call_soon_threadsafe."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any

from app.engine.types import DoneEvent, EngineError, Event, GenerationRequest, GenerationSummary, StepEvent, TextEvent
from app.engine.worker import Engine, RequestHandle
from app.server.metrics import Metrics

_END = object()


class Generation:
    """A submitted request seen from the event loop: `await next()` yields TextEvent/DoneEvent, then None.

    It is the request's EventSink: the engine thread calls `push`/`end`, which hand each item to the loop with
    call_soon_threadsafe (no pump thread). `end` also records the outcome in the metrics, so a generation whose
    client went away is still accounted for (e.g. as finish_reason "cancelled").
    """

    def __init__(
        self,
        engine: Engine,
        request: GenerationRequest,
        metrics: Metrics,
        on_start: Callable[[Generation], None] | None = None,
        on_end: Callable[[Generation], None] | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._pending: deque[Any] = deque()
        self._metrics = metrics
        self._cancelled = False
        self.finished = False
        self.summary: GenerationSummary | None = None
        self._on_end = on_end
        # Registered before submitting: the engine thread may end the request before submit() even returns.
        if on_start is not None:
            on_start(self)
        try:
            self.handle: RequestHandle = engine.submit(request, sink=self)  # raises QueueFull
        except BaseException:
            if on_end is not None:
                on_end(self)
            raise
        if self._cancelled:  # cancel_all() ran between registering and submitting
            self.handle.cancel()

    # -- the EventSink side (engine thread) -----------------------------------------------------------------------
    def push(self, ev: Event) -> None:
        if isinstance(ev, StepEvent):
            return  # per-step telemetry stays in the summary; skipping saves a loop wake-up per step
        if isinstance(ev, DoneEvent):
            self._metrics.observe_summary(ev.summary)
        self._put(ev)

    def end(self, error: EngineError | None) -> None:
        if error is not None:
            if self._cancelled:
                self._metrics.observe_cancelled_before_start()
            else:
                self._metrics.observe_error(error)
            self._put(error)
        self._put(_END)
        if self._on_end is not None:
            self._on_end(self)

    def _put(self, item: object) -> None:
        # A closed loop (server stopped) raises RuntimeError: nobody is listening any more, so drop the event.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    # -- the event-loop side --------------------------------------------------------------------------------------
    def cancel(self) -> None:
        self._cancelled = True
        if hasattr(self, "handle"):
            self.handle.cancel()

    async def next(self) -> TextEvent | DoneEvent | None:
        """The next event, or None at the end; raises the request's EngineError."""
        if self.finished:
            return None
        item = self._pending.popleft() if self._pending else await self._queue.get()
        if item is _END:
            self.finished = True
            return None
        if isinstance(item, EngineError):
            self.finished = True
            raise item
        if isinstance(item, DoneEvent):
            self.summary = item.summary
        return item

    def ready(self) -> list[TextEvent | DoneEvent]:
        """Events already waiting (without blocking), so a burst of tokens can go out as one chunk."""
        items: list[TextEvent | DoneEvent] = []
        while not self._pending and not self._queue.empty():
            item = self._queue.get_nowait()
            if item is _END or isinstance(item, EngineError):
                self._pending.append(item)  # the caller meets the end (or the error) on its next `next()`
                break
            if isinstance(item, DoneEvent):
                self.summary = item.summary
            items.append(item)
        return items

    async def result(self) -> GenerationSummary:
        """Drain to the end; the summary of a finished generation."""
        while await self.next() is not None:
            pass
        assert self.summary is not None
        return self.summary
