"""The flow both completion dialects share: check the model, size the reply, submit, then stream or answer once."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app.engine.types import DoneEvent, EngineError, GenerationRequest, TextEvent
from app.server.body import ClientGone, race_disconnect
from app.server.bridge import Generation
from app.server.errors import ApiError, from_engine_error
from app.server.openai_common import StreamFormat, requested_max_tokens
from app.server.state import ServerState


class CompletionFlow:
    """One server's request flow; each dialect module supplies its request mapping, stream format and body."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.engine = state.engine

    def check_model(self, name: str) -> None:
        if name not in self.state.aliases:
            raise ApiError(
                404,
                f"model {name!r} not found; this server serves {self.state.model_id!r}",
                code="model_not_found",
                param="model",
            )

    def resolve_max_tokens(self, request: GenerationRequest, explicit: int | None) -> GenerationRequest:
        """Without a client limit, generate up to the end of the context window: the engine measures the prompt
        when it runs the request, so a full queue answers 429 at once instead of after the running generation."""
        if explicit is not None:
            return request
        return request.to_context_end()

    def submit(self, request: GenerationRequest) -> Generation:
        try:
            return Generation(
                self.engine, request, self.state.metrics, on_start=self.state.track, on_end=self.state.untrack
            )
        except EngineError as e:  # QueueFull -> 429 with Retry-After
            raise from_engine_error(e) from None

    async def first_event(self, request: Request, gen: Generation) -> TextEvent | DoneEvent | None:
        try:
            return await race_disconnect(request, gen, gen.next())
        except EngineError as e:
            raise _failed(gen, e) from None

    async def collect(self, request: Request, gen: Generation) -> Any:
        try:
            return await race_disconnect(request, gen, gen.result())
        except EngineError as e:
            raise _failed(gen, e) from None

    def stream_response(self, gen: Generation, first: TextEvent | DoneEvent | None, fmt: StreamFormat) -> Response:
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
                if fmt.done_line:
                    yield fmt.done_line
            except EngineError as e:
                # The status line is already sent: report in-band, as OpenAI does, so clients raise an APIError.
                yield fmt.error(from_engine_error(e))
            finally:
                if not gen.finished:
                    gen.cancel()  # the client went away (or the server is stopping): free the engine within a step

        return StreamingResponse(
            body(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def generate(
        self, request: Request, req: Any, prefix: str, to_generation: Any, fmt: Any, to_body: Any
    ) -> Response:
        """The flow both completion routes share: check, submit, then stream chunks or answer with one body."""
        if req.model:  # required by the OpenAI dialects' schemas; llama-server's native ones may leave it out
            self.check_model(req.model)
        rid = f"{prefix}{uuid.uuid4().hex}"
        req = with_defaults(req, self.state.sampling_defaults)
        gen_req = to_generation(req, sources=self.state.sources, request_id=rid)
        gen_req = self.resolve_max_tokens(gen_req, requested_max_tokens(req))
        gen = self.submit(gen_req)
        created = int(time.time())
        try:
            if req.stream:
                include_usage = bool(req.stream_options and req.stream_options.include_usage)
                first = await self.first_event(request, gen)
                return self.stream_response(gen, first, fmt(rid, created, self.state.model_id, include_usage))
            summary = await self.collect(request, gen)
        except ClientGone:
            return Response(status_code=499)  # nobody reads it; nginx's "client closed request"
        body = to_body(summary, id=rid, created=created, model=self.state.model_id)
        return JSONResponse(body if isinstance(body, dict) else body.model_dump(mode="json", exclude_none=True))


def with_defaults(req: Any, defaults: dict[str, Any]) -> Any:
    """The request with the server's sampling defaults in the fields it left out (None), as llama-server's command
    line defaults apply to its requests."""
    fields = getattr(type(req), "model_fields", {})
    update = {k: v for k, v in defaults.items() if k in fields and getattr(req, k) is None}
    return req.model_copy(update=update) if update else req


def _failed(gen: Generation, err: EngineError) -> ApiError:
    if gen.handle.cancelled.is_set():
        # Only the server cancels a request whose client is still there: it is stopping.
        return ApiError(503, "the server is stopping; the request was cancelled", code="server_stopping")
    return from_engine_error(err)
