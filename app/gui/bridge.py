"""Qt bridges to blocking work: a generation's events (delivered by the engine thread) and background calls."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.types import DoneEvent, EngineError, Event, GenerationRequest, GenerationSummary, TextEvent

if TYPE_CHECKING:  # the engine (and llama.cpp) is imported only where a model is loaded
    from app.engine.worker import Engine, RequestHandle


class GenerationBridge(QObject):
    """The EventSink of one GUI request: the engine thread appends its text here (no signal per token, no thread).

    The chat panel takes what arrived on its redraw tick (`take`), so a burst of tokens costs the GUI thread one
    wake-up. `first_token` and `finished` are emitted from the engine thread; because this QObject lives in the GUI
    thread, Qt queues them and the slots run on the main thread. `finished` is always last, after every event.
    """

    first_token = Signal(float)  # seconds from submit to the first text
    finished = Signal()  # then `summary` (success) or `error` (the EngineError message) is set

    def __init__(self, engine: Engine, request: GenerationRequest, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.request = request
        self.handle: RequestHandle | None = None
        self.t_submit = 0.0
        self.ttft: float | None = None
        self.summary: GenerationSummary | None = None
        self.error: str | None = None
        self._texts: deque[TextEvent] = deque()  # appended by the engine thread, popped by the GUI thread
        self._ended = threading.Event()

    def start(self) -> None:
        """Submit the request; a refused submit (queue full, bad request) reports via `finished` with `error`."""
        self.t_submit = time.perf_counter()
        try:
            self.handle = self.engine.submit(self.request, sink=self)
        except EngineError as e:
            # Delivered from the event loop like every other outcome, so callers can connect after start().
            refused = e
            QTimer.singleShot(0, self, lambda: self.end(refused))

    # -- EventSink (engine thread): O(1) work per event --------------------------------------------------------
    def push(self, ev: Event) -> None:
        if isinstance(ev, TextEvent):
            if self.ttft is None:
                self.ttft = time.perf_counter() - self.t_submit
                self.first_token.emit(self.ttft)
            self._texts.append(ev)
        elif isinstance(ev, DoneEvent):
            self.summary = ev.summary

    def end(self, error: EngineError | None) -> None:
        self.error = str(error) if error is not None else None
        self._ended.set()
        self.finished.emit()

    # -- GUI thread ---------------------------------------------------------------------------------------------
    def take(self) -> list[TextEvent]:
        """The text events that arrived since the last call, in order."""
        out: list[TextEvent] = []
        while self._texts:
            out.append(self._texts.popleft())
        return out

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the request's end (used on shutdown); True when it has ended (or never started)."""
        return self.handle is None or self._ended.wait(timeout)

    @property
    def running(self) -> bool:
        return self.handle is not None and not self._ended.is_set()


class BackgroundCall(QObject):
    """Runs one blocking callable on a daemon thread and reports its result or exception as a signal."""

    succeeded = Signal(object)
    failed = Signal(str)

    def __init__(self, fn: Callable[[], Any], name: str = "dynadraft-gui-call", parent: QObject | None = None):
        super().__init__(parent)
        self._fn = fn
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> BackgroundCall:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            result = self._fn()
        except Exception as e:
            self.failed.emit(str(e) or type(e).__name__)
        else:
            self.succeeded.emit(result)

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()
