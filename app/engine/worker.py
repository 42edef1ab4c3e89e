"""The one engine thread that owns every llama.cpp context; GUI, HTTP and CLI submit jobs through a bounded queue."""

from __future__ import annotations

import itertools
import logging
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from app.engine.config import EngineConfig
from app.engine.runtime import ModelMeta, Runtime, Tokenizer
from app.engine.session import Session
from app.engine.types import DoneEvent, EngineError, Event, GenerationRequest, GenerationSummary, QueueFull

log = logging.getLogger(__name__)
T = TypeVar("T")

_END = object()  # marks the end of a handle's event stream


class EventSink(Protocol):
    """Where the engine thread delivers one request's events, in order: keep each call short (hand off, don't work).

    `end` comes exactly once, last; `error` is None on success and is already a user-facing EngineError otherwise
    (internal errors are mapped here, in the engine, so no consumer repeats that mapping).
    """

    def push(self, ev: Event) -> None: ...

    def end(self, error: EngineError | None) -> None: ...


class RequestHandle:
    """A submitted generation: `cancel()` from any thread; without a sink, iterate `events()` from any thread."""

    def __init__(self, request: GenerationRequest, sink: EventSink | None = None) -> None:
        self.request = request
        self.cancelled = threading.Event()
        self._events: queue.Queue[Any] = queue.Queue()
        self._sink = sink
        self.summary: GenerationSummary | None = None
        self.error: EngineError | None = None

    def cancel(self) -> None:
        self.cancelled.set()

    def deliver(self, ev: Event) -> None:
        """Engine thread: one event, to the sink or to the queue `events()` reads."""
        if isinstance(ev, DoneEvent):
            self.summary = ev.summary
        if self._sink is not None:
            self._sink.push(ev)
        else:
            self._events.put(ev)

    def finish(self, error: EngineError | None = None) -> None:
        """Engine thread: the end of the stream (exactly once)."""
        self.error = error
        if self._sink is not None:
            self._sink.end(error)
        else:
            self._events.put(_END)

    def events(self, timeout: float | None = None) -> Iterator[Event]:
        """Yield events as the engine produces them; raises the request's EngineError if it failed."""
        if self._sink is not None:
            raise RuntimeError("this request delivers its events to a sink")
        while True:
            item = self._events.get(timeout=timeout)
            if item is _END:
                if self.error is not None:
                    raise self.error
                return
            yield item

    def result(self, timeout: float | None = None) -> GenerationSummary:
        """Drain the events and return the summary."""
        for _ in self.events(timeout):
            pass
        assert self.summary is not None
        return self.summary


@dataclass
class _Job:
    handle: RequestHandle | None
    fn: Callable[[Runtime], Any] | None
    future: Future[Any] | None


def apply_dd_options(session: Runtime, enabled: bool, force: bool) -> str:
    """Set DD on/off and force mode on a session of either runtime (the config keeps them across table reloads)."""
    session.config = replace(session.config, dynamic_draft=enabled, dd_force=force)
    session.set_policy(session.policy.with_options(enabled=enabled, force=force))
    return "Dynamic Draft off" if not enabled else str(session.dd_status) + ("; force mode" if force else "")


def print_context_notes(engine: Engine, prog: str) -> None:
    """Say on stderr where the loaded context window is not what was asked (a command line's start)."""
    for note in engine.model_meta.notes:
        print(f"{prog}: {note}", file=sys.stderr, flush=True)


def open_session(config: EngineConfig) -> Runtime:
    """The runtime for a config: the bundled llama.cpp, or an external llama-server when `server_binary` is set.

    Every model file is checked first, so a truncated download is refused with a sentence instead of a load failure.
    """
    from app.models.gguf_check import check_complete

    for path in (config.model, config.draft):
        if path:
            check_complete(path)
    if config.server_binary:
        from app.engine.external import ExternalSession

        return ExternalSession(config)
    from app.models.preflight import check_before_load

    for path in (config.model, config.draft):
        # A file we can classify as needing a fork never reaches llama.cpp's generic "unsupported format" error.
        problem = check_before_load(path) if path else None
        if problem:
            raise EngineError(problem)
    return Session(config)


class Engine:
    """Loads a Runtime on its own thread and serves jobs in FIFO order from a bounded queue."""

    def __init__(self, config: EngineConfig, max_queue: int = 8, on_event: Callable[[Event], None] | None = None):
        self.config = config
        self.max_queue = max_queue
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=max_queue)
        self._ready = threading.Event()
        self._load_error: BaseException | None = None
        self._session: Runtime | None = None
        self._meta: ModelMeta | None = None
        self._tokenizer: Tokenizer | None = None
        self._render: Callable[[GenerationRequest], str] | None = None
        self._templated: Callable[[GenerationRequest], tuple[list[int], str]] | None = None
        self._sources: frozenset[str] | None = None
        self._busy = threading.Event()
        self._ids = itertools.count(1)
        self.on_event = on_event  # optional tap (e.g. live graphs); called on the engine thread, keep it cheap
        self._thread = threading.Thread(target=self._run, name="dynadraft-engine", daemon=True)
        self._thread.start()

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def wait_ready(self, timeout: float | None = None) -> Engine:
        """Block until the models are loaded; re-raise the load error if there was one."""
        if not self._ready.wait(timeout):
            raise TimeoutError("engine did not load in time")
        if self._load_error is not None:
            raise EngineError(f"could not load the model: {self._load_error}") from self._load_error
        return self

    def close(self, timeout: float = 30.0) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout)

    def __enter__(self) -> Engine:
        return self.wait_ready()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize() + (1 if self._busy.is_set() else 0)

    # -- submitting -----------------------------------------------------------------------------------------------
    def submit(self, request: GenerationRequest, sink: EventSink | None = None) -> RequestHandle:
        """Queue a generation; raises QueueFull when `max_queue` jobs are already waiting.

        With a `sink`, the engine thread hands it each event as it is produced (no thread per request); without
        one, read them with `handle.events()`.
        """
        self._check_alive()
        handle = RequestHandle(request, sink)
        try:
            self._queue.put_nowait(_Job(handle, None, None))
        except queue.Full:
            raise QueueFull(f"the engine queue is full ({self.max_queue} waiting); try again shortly") from None
        return handle

    @property
    def model_meta(self) -> ModelMeta:
        """What the runtime knows of the loaded model (read at load, so no call queues behind a generation)."""
        return self._loaded(self._meta)

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer, for any thread (Tokenizer says why that is safe); read at load, like model_meta."""
        return self._loaded(self._tokenizer)

    @property
    def render_prompt(self) -> Callable[[GenerationRequest], str]:
        """The model's chat template over a request's messages, for any thread (Runtime says why); read at load."""
        return self._loaded(self._render)

    @property
    def templated(self) -> Callable[[GenerationRequest], tuple[list[int], str]]:
        """A request's prompt tokens exactly as the runtime will see them, and their text, for any thread (it reads
        the template and vocabulary, never a context, as render_prompt does); read at load."""
        return self._loaded(self._templated)

    def _loaded(self, value: T | None) -> T:
        """A value read at load; before it exists, why not (loading, failed, or closed)."""
        if value is None:
            self._check_alive()
            raise EngineError("the model is still loading")
        return value

    def dd_table(self) -> Any:
        """The calibration table Dynamic Draft applies now (a FrontierTable), or None: no table, stale, or DD off.

        Read without queueing behind a generation: the session swaps its policy whole and never mutates one, so
        reading the reference from another thread (the HTTP server's) is safe."""
        policy = getattr(getattr(self, "_session", None), "policy", None)
        if policy is None or policy.unavailable is not None or not policy.enabled:
            return None
        return policy.table

    def set_dd_options(self, enabled: bool, force: bool, timeout: float | None = None) -> str:
        """Switch Dynamic Draft on/off and force mode, for this and later requests; returns the new status line."""
        return self.call(lambda s: apply_dd_options(s, enabled, force), timeout=timeout)

    def generate(self, request: GenerationRequest) -> GenerationSummary:
        return self.submit(request).result()

    def call(self, fn: Callable[[Runtime], T], timeout: float | None = None) -> T:
        """Run `fn(runtime)` on the engine thread (tokenize, calibrate, inspect) and return its result."""
        self._check_alive()
        fut: Future[T] = Future()
        self._queue.put(_Job(None, fn, fut), timeout=timeout)
        return fut.result(timeout)

    def draft_sources(self) -> frozenset[str]:
        """The draft sources the loaded model offers ("lookup", and "draft" / "mtp" when loaded); read at load."""
        return self._loaded(self._sources)

    def _check_alive(self) -> None:
        """Refuse work the engine thread will never serve (load failed, or closed), instead of hanging."""
        if self._load_error is not None:
            raise EngineError(f"the engine failed to load: {self._load_error}")
        if not self._thread.is_alive():
            raise EngineError("the engine is closed")

    # -- the thread -----------------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._session = open_session(self.config)
            self._meta = self._session.model_meta()
            self._tokenizer = self._session.tokenizer()
            self._render = self._session.render_prompt
            self._templated = self._session.templated
            self._sources = frozenset(self._session.capabilities.sources)
        except BaseException as e:  # reported through wait_ready
            self._load_error = e
            self._ready.set()
            self._fail_pending(e)
            return
        self._ready.set()
        session = self._session
        try:
            while True:
                job = self._queue.get()
                if job is None:
                    break
                self._busy.set()
                try:
                    if job.handle is not None:
                        self._serve(session, job.handle)
                    elif job.fn is not None and job.future is not None and job.future.set_running_or_notify_cancel():
                        try:
                            job.future.set_result(job.fn(session))
                        except BaseException as e:
                            job.future.set_exception(e)
                finally:
                    self._busy.clear()
        finally:
            session.close()

    def _serve(self, session: Runtime, handle: RequestHandle) -> None:
        if handle.cancelled.is_set():
            self._finish(handle, EngineError("cancelled before it started"))
            return
        error: EngineError | None = None
        try:
            for ev in session.generate(handle.request, handle.cancelled):
                if self.on_event is not None:
                    self.on_event(ev)
                handle.deliver(ev)
        except EngineError as e:
            error = e
        except Exception as e:  # a bug (here or in a sink) must not kill the engine thread
            log.exception("generation failed")
            error = EngineError(f"internal error: {type(e).__name__}: {e}")
        finally:
            self._finish(handle, error)

    @staticmethod
    def _finish(handle: RequestHandle, error: EngineError | None) -> None:
        try:
            handle.finish(error)
        except Exception:  # a broken sink must not kill the engine thread either
            log.exception("an event sink failed at the end of a request")

    def _fail_pending(self, err: BaseException) -> None:
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is None:
                continue
            if job.handle is not None:
                self._finish(job.handle, EngineError(f"engine failed to load: {err}"))
            elif job.future is not None:
                job.future.set_exception(err)
