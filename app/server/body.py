"""Reading a request: a bounded body parsed strictly into its model, and watching for the client going away."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from app.server.bridge import Generation
from app.server.errors import from_validation_error
from app.server.middleware import drain, too_large

M = TypeVar("M", bound=BaseModel)


class ClientGone(Exception):
    """The client disconnected before its response could start."""


async def parse_body(request: Request, model: type[M], limit: int) -> M:
    """Read the body (bounded even without Content-Length) and validate it strictly into `model`."""
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:  # our own receive loop: we must know whether the body has ended before draining the rest
        message = await request.receive()
        if message["type"] != "http.request":
            raise ClientGone
        chunk = message.get("body", b"")
        more = bool(message.get("more_body", False))
        size += len(chunk)
        if size > limit:
            if more:
                await drain(request.receive)
            raise too_large(limit)
        chunks.append(chunk)
    try:
        return model.model_validate_json(b"".join(chunks))
    except ValidationError as e:
        raise from_validation_error(e) from None


async def wait_disconnect(request: Request) -> None:
    # After the body is read, the server's receive() only returns when the client goes away.
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def race_disconnect(request: Request, gen: Generation, work: Any) -> Any:
    """Await `work` unless the client disconnects first; then cancel the generation and raise ClientGone."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(wait_disconnect(request))
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
        raise ClientGone
    return task.result()
