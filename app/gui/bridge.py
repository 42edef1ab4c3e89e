"""Qt bridges to blocking work: a generation's event stream and engine loading, pumped on worker threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app.engine.types import DoneEvent, EngineError, GenerationRequest, StepEvent, TextEvent

if TYPE_CHECKING:  # the engine (and llama.cpp) is imported only where a model is loaded
    from app.engine.worker import Engine, RequestHandle


class GenerationBridge(QObject):
    """Iterates `handle.events()` on a daemon thread and re-emits each event as a (queued) Qt signal.

    The signals are emitted from the worker thread; because this QObject lives in the GUI thread, Qt queues them
    and the slots run on the main thread, which therefore never blocks on the engine. `finished` is always last.
    """

    text = Signal(object)  # TextEvent
    step = Signal(object)  # StepEvent
    done = Signal(object)  # GenerationSummary
    failed = Signal(str)  # the EngineError message
    first_token = Signal(float)  # seconds from submit to the first text
    finished = Signal()

    def __init__(self, engine: Engine, request: GenerationRequest, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.request = request
        self.handle: RequestHandle | None = None
        self.t_submit = 0.0
        self.ttft: float | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Submit the request and start pumping; a refused submit (queue full, bad request) reports via `failed`."""
        self.t_submit = time.perf_counter()
        try:
            self.handle = self.engine.submit(self.request)
        except EngineError as e:
            self._thread = threading.Thread(target=self._fail_later, args=(str(e),), daemon=True)
        else:
            self._thread = threading.Thread(target=self._pump, name="dynadraft-gui-bridge", daemon=True)
        self._thread.start()

    def _fail_later(self, message: str) -> None:
        # Emitted from a thread like every other outcome, so callers can connect after start() without a race.
        self.failed.emit(message)
        self.finished.emit()

    def _pump(self) -> None:
        assert self.handle is not None
        try:
            for ev in self.handle.events():
                if isinstance(ev, TextEvent):
                    if self.ttft is None:
                        self.ttft = time.perf_counter() - self.t_submit
                        self.first_token.emit(self.ttft)
                    self.text.emit(ev)
                elif isinstance(ev, StepEvent):
                    self.step.emit(ev)
                elif isinstance(ev, DoneEvent):
                    self.done.emit(ev.summary)
        except EngineError as e:
            self.failed.emit(str(e))
        except Exception as e:  # never let a bug kill the pump silently: the GUI would wait forever
            self.failed.emit(f"internal error: {type(e).__name__}: {e}")
        finally:
            self.finished.emit()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Join the pump thread (used on shutdown); True when it has ended."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


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
