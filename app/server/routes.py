"""The FastAPI app factory: OpenAI-compatible routes, health, metrics and the read-only Dynamic Draft table."""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.engine.types import DoneEvent, EngineError, GenerationRequest, QueueFull, TextEvent, TokenLogprob
from app.engine.worker import Engine
from app.server import adapters
from app.server.bridge import Generation
from app.server.errors import ApiError, from_engine_error, from_validation_error
from app.server.logprobs import TokenTexts, completion_logprobs
from app.server.metrics import Metrics
from app.server.schemas import ChatCompletionRequest, CompletionRequest, ModelCard, ModelList

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # a long chat history at 128k context is ~1 MB of JSON; 8x headroom
_DRAIN_LIMIT = 64 * 1024 * 1024  # read (and discard) at most this much of an oversized body so the 413 arrives
OPEN_PATHS = frozenset({"/health"})  # answered without an API key so the GUI can poll status
M = TypeVar("M", bound=BaseModel)
DDTableProvider = Callable[[], Any]


@dataclass
class ServerState:
    """Everything the routes need, kept on `app.state.dynadraft` (the tests and the runner read it too)."""

    engine: Engine
    model_id: str
    aliases: frozenset[str]
    has_draft: bool
    max_body_bytes: int
    metrics: Metrics = field(default_factory=Metrics)
    dd_table_provider: DDTableProvider | None = None
    created: int = field(default_factory=lambda: int(time.time()))
    _active: set[Generation] = field(default_factory=set)
    _active_lock: threading.Lock = field(default_factory=threading.Lock)

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


class _ClientGone(Exception):
    """The client disconnected before its response could start."""


# -- middleware ----------------------------------------------------------------------------------------------------
async def _send_error(send: Send, err: ApiError) -> None:
    body = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in err.headers.items()]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _drain(receive: Receive, limit: int = _DRAIN_LIMIT) -> None:
    """Read the rest of a refused body: answering before the client finished sending can reset the connection."""
    seen = 0
    while seen <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


class GuardMiddleware:
    """Counts responses by status, enforces the API key and refuses oversized bodies (by Content-Length) early."""

    def __init__(self, app: ASGIApp, *, state: ServerState, api_key: str | None) -> None:
        self.app = app
        self.state = state
        self.api_key = api_key.encode() if api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        metrics = self.state.metrics

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                metrics.observe_http(int(message["status"]))
            await send(message)

        headers = dict(scope.get("headers") or [])
        if self.api_key is not None and scope["path"] not in OPEN_PATHS and scope["method"] != "OPTIONS":
            auth = headers.get(b"authorization", b"")
            scheme, _, token = auth.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.api_key):
                await _drain(receive)
                msg = "missing or invalid API key: send 'Authorization: Bearer <key>'"
                err = ApiError(401, msg, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
                await _send_error(counting_send, err)
                return
        length = headers.get(b"content-length")
        if length is not None:
            try:
                too_big = int(length) > self.state.max_body_bytes
            except ValueError:
                await _send_error(counting_send, ApiError(400, "invalid Content-Length header", code="invalid_request"))
                return
            if too_big:
                await _drain(receive)
                await _send_error(counting_send, _too_large(self.state.max_body_bytes))
                return
        await self.app(scope, receive, counting_send)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body larger than {limit} bytes", code="request_too_large")


# -- request helpers -----------------------------------------------------------------------------------------------
async def _parse(request: Request, model: type[M], limit: int) -> M:
    """Read the body (bounded even without Content-Length) and validate it strictly into `model`."""
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:  # our own receive loop: we must know whether the body has ended before draining the rest
        message = await request.receive()
        if message["type"] != "http.request":
            raise _ClientGone
        chunk = message.get("body", b"")
        more = bool(message.get("more_body", False))
        size += len(chunk)
        if size > limit:
            if more:
                await _drain(request.receive)
            raise _too_large(limit)
        chunks.append(chunk)
    try:
        return model.model_validate_json(b"".join(chunks))
    except ValidationError as e:
        raise from_validation_error(e) from None


async def _wait_disconnect(request: Request) -> None:
    # After the body is read, the server's receive() only returns when the client goes away.
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _race_disconnect(request: Request, gen: Generation, work: Any) -> Any:
    """Await `work` unless the client disconnects first; then cancel the generation and raise _ClientGone."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_wait_disconnect(request))
    try:
        done, _ = await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        gen.cancel()
        task.cancel()
        raise
    finally:
        watch.cancel()
    if task not in done:
        gen.cancel()
        task.cancel()
        raise _ClientGone
    return task.result()


def _sse(payload: BaseModel) -> str:
    return f"data: {payload.model_dump_json(exclude_none=True)}\n\n"


def _model_aliases(model_id: str, model_path: str, extra: Iterable[str]) -> frozenset[str]:
    p = Path(model_path)
    return frozenset({model_id, p.name, p.stem, *extra})


# -- the app -------------------------------------------------------------------------------------------------------
def create_app(
    engine: Engine,
    model_id: str | None = None,
    *,
    api_key: str | None = None,
    cors_origins: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    dd_table_provider: DDTableProvider | None = None,
    aliases: Iterable[str] = (),
    metrics: Metrics | None = None,
) -> FastAPI:
    """Build the API around one loaded Engine. Binding, threads and start/stop live in `runner.EndpointServer`."""
    config = engine.config
    model_id = model_id or Path(config.model).stem
    state = ServerState(
        engine=engine,
        model_id=model_id,
        aliases=_model_aliases(model_id, config.model, aliases),
        has_draft=config.draft is not None,
        max_body_bytes=max_body_bytes,
        metrics=metrics or Metrics(),
        dd_table_provider=dd_table_provider,
    )
    app = FastAPI(title="DynaDraft", description="Local OpenAI-compatible endpoint", docs_url=None, redoc_url=None)
    app.state.dynadraft = state
    _install_error_handlers(app)
    _install_routes(app, state)
    app.add_middleware(GuardMiddleware, state=state, api_key=api_key)
    if cors_origins:
        # Added last so it is outermost: preflights are answered without a key, and errors carry CORS headers.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"],
        )
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(_ClientGone)
    async def client_gone(_: Request, __: _ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it; nginx's "client closed request"

    @app.exception_handler(EngineError)
    async def engine_error(_: Request, exc: EngineError) -> JSONResponse:
        err = from_engine_error(exc)
        return JSONResponse(err.body(), status_code=err.status, headers=err.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = from_validation_error(exc)  # FastAPI says 422; OpenAI clients expect 400
        return JSONResponse(err.body(), status_code=err.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        err = ApiError(exc.status_code, str(exc.detail), code=code)
        return JSONResponse(err.body(), status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error in the HTTP endpoint")
        err = ApiError(500, f"internal server error ({type(exc).__name__})", code="internal_error")
        return JSONResponse(err.body(), status_code=500)


def _install_routes(app: FastAPI, state: ServerState) -> None:
    engine = state.engine

    def card() -> ModelCard:
        return ModelCard(id=state.model_id, created=state.created)

    def check_model(name: str) -> None:
        if name not in state.aliases:
            raise ApiError(
                404,
                f"model {name!r} not found; this server serves {state.model_id!r}",
                code="model_not_found",
                param="model",
            )

    async def resolve_max_tokens(request: GenerationRequest, explicit: int | None) -> GenerationRequest:
        """Without a client limit, generate up to the end of the context window (needs the prompt's length)."""
        if explicit is not None:
            return request
        if engine.queue_depth > engine.max_queue:
            raise from_engine_error(_queue_full(engine))

        def measure(session: Any) -> tuple[int, int]:
            return len(session.format_prompt(request)), int(session.n_ctx)

        try:
            n_prompt, n_ctx = await anyio.to_thread.run_sync(engine.call, measure)
        except EngineError as e:
            raise from_engine_error(e) from None
        room = n_ctx - n_prompt
        if room < 1:
            raise ApiError(
                400,
                f"the prompt ({n_prompt} tokens) fills the context window of {n_ctx} tokens",
                code="context_length_exceeded",
                param="messages",
            )
        return adapters.with_max_tokens(request, room)

    def submit(request: GenerationRequest) -> Generation:
        try:
            return Generation(engine, request, state.metrics, on_start=state.track, on_end=state.untrack)
        except EngineError as e:  # QueueFull -> 429 with Retry-After
            raise from_engine_error(e) from None

    async def first_event(request: Request, gen: Generation) -> TextEvent | DoneEvent | None:
        try:
            return await _race_disconnect(request, gen, gen.next())  # type: ignore[no-any-return]
        except EngineError as e:
            raise _failed(gen, e) from None

    async def collect(request: Request, gen: Generation) -> Any:
        try:
            return await _race_disconnect(request, gen, gen.result())
        except EngineError as e:
            raise _failed(gen, e) from None

    def stream_response(gen: Generation, first: TextEvent | DoneEvent | None, fmt: _StreamFormat) -> Response:
        async def body() -> AsyncIterator[str]:
            try:
                for chunk in fmt.opening():
                    yield chunk
                events: list[TextEvent | DoneEvent] = [] if first is None else [first, *gen.ready()]
                while True:
                    texts = [e for e in events if isinstance(e, TextEvent)]
                    text = "".join(e.text for e in texts)
                    logprobs = tuple(lp for e in texts for lp in e.logprobs)
                    if text or logprobs:
                        for chunk in fmt.text(text, logprobs):
                            yield chunk
                    for e in events:
                        if isinstance(e, DoneEvent):
                            for chunk in fmt.closing(e):
                                yield chunk
                    ev = await gen.next()
                    if ev is None:
                        break
                    events = [ev, *gen.ready()]
                yield "data: [DONE]\n\n"
            except EngineError as e:
                # The status line is already sent: report in-band, as OpenAI does, so clients raise an APIError.
                yield f"data: {json.dumps(from_engine_error(e).body())}\n\n"
            finally:
                if not gen.finished:
                    gen.cancel()  # the client went away (or the server is stopping): free the engine within a step

        return StreamingResponse(
            body(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    # -- routes --------------------------------------------------------------------------------------------------
    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": state.model_id, "queue_depth": engine.queue_depth}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(state.metrics.render(engine.queue_depth), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return ModelList(data=[card()]).model_dump()

    @app.get("/v1/models/{model:path}")
    async def get_model(model: str) -> dict[str, Any]:
        check_model(model)
        return card().model_dump()

    @app.get("/v1/dynamic-draft/table")
    async def dd_table() -> Any:
        table = state.dd_table_provider() if state.dd_table_provider is not None else None
        if table is None:
            raise ApiError(404, "no Dynamic Draft table is active", code="no_table")
        return table.to_dict() if hasattr(table, "to_dict") else table

    async def generate(request: Request, req: Any, prefix: str, to_generation: Any, fmt: Any, to_body: Any) -> Response:
        """The flow both completion routes share: check, submit, then stream chunks or answer with one body."""
        check_model(req.model)
        rid = f"{prefix}-{uuid.uuid4().hex}"
        gen_req = to_generation(req, has_draft=state.has_draft, request_id=rid)
        gen_req = await resolve_max_tokens(gen_req, adapters.requested_max_tokens(req))
        gen = submit(gen_req)
        created = int(time.time())
        try:
            if req.stream:
                include_usage = bool(req.stream_options and req.stream_options.include_usage)
                first = await first_event(request, gen)
                return stream_response(gen, first, fmt(rid, created, state.model_id, include_usage))
            summary = await collect(request, gen)
        except _ClientGone:
            return Response(status_code=499)  # nobody reads it; nginx's "client closed request"
        body = to_body(summary, id=rid, created=created, model=state.model_id)
        return JSONResponse(body.model_dump(mode="json", exclude_none=True))

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req = await _parse(request, ChatCompletionRequest, state.max_body_bytes)
        options = adapters.output_options(req)
        return await generate(
            request,
            req,
            "chatcmpl",
            adapters.chat_to_generation,
            functools.partial(_ChatFormat, options=options),
            functools.partial(adapters.chat_completion, options=options),
        )

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        req = await _parse(request, CompletionRequest, state.max_body_bytes)
        return await generate(
            request,
            req,
            "cmpl",
            adapters.completion_to_generation,
            functools.partial(_CompletionFormat, logprobs=req.logprobs),
            functools.partial(adapters.completion, logprobs=req.logprobs),
        )


def _failed(gen: Generation, err: EngineError) -> ApiError:
    if gen.handle.cancelled.is_set():
        # Only the server cancels a request whose client is still there: it is stopping.
        return ApiError(503, "the server is stopping; the request was cancelled", code="server_stopping")
    return from_engine_error(err)


def _queue_full(engine: Engine) -> EngineError:
    return QueueFull(f"the engine queue is full ({engine.max_queue} waiting); try again shortly")


# -- stream formats ------------------------------------------------------------------------------------------------
@dataclass
class _StreamFormat:
    id: str
    created: int
    model: str
    include_usage: bool

    def opening(self) -> list[str]:
        return []

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> list[str]:
        raise NotImplementedError

    def closing(self, done: DoneEvent) -> list[str]:
        raise NotImplementedError


@dataclass
class _ChatFormat(_StreamFormat):
    options: adapters.OutputOptions | None = None

    def __post_init__(self) -> None:
        assert self.options is not None
        self.stream = adapters.ChatStream(self.options, id=self.id, created=self.created, model=self.model)

    def opening(self) -> list[str]:
        return [_sse(adapters.chat_chunk(id=self.id, created=self.created, model=self.model, content="", role=True))]

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> list[str]:
        return [_sse(c) for c in self.stream.text(text, logprobs)]

    def closing(self, done: DoneEvent) -> list[str]:
        return [_sse(c) for c in self.stream.closing(done.summary, self.include_usage)]


@dataclass
class _CompletionFormat(_StreamFormat):
    logprobs: int | None = None

    def __post_init__(self) -> None:
        self.texts = TokenTexts()

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> list[str]:
        lp = None
        if self.logprobs is not None:
            lp = completion_logprobs(logprobs, self.texts, with_top=self.logprobs > 0)
        chunk = adapters.completion_chunk(id=self.id, created=self.created, model=self.model, text=text, logprobs=lp)
        return [_sse(chunk)]

    def closing(self, done: DoneEvent) -> list[str]:
        chunks = adapters.completion_final_chunks(
            done.summary, id=self.id, created=self.created, model=self.model, include_usage=self.include_usage
        )
        return [_sse(c) for c in chunks]
