"""The outermost guard: API key, early refusal of oversized bodies, and counting responses by status."""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server.browser_guard import BrowserPolicy, check_request
from app.server.errors import ApiError
from app.server.state import ServerState

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # a long chat history at 128k context is ~1 MB of JSON; 8x headroom
_DRAIN_LIMIT = 64 * 1024 * 1024  # read (and discard) at most this much of an oversized body so the 413 arrives
OPEN_PATHS = frozenset({"/health"})  # answered without an API key so the GUI can poll status


async def send_error(send: Send, err: ApiError, path: str = "") -> None:
    body = json.dumps(err.body_for(path)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in err.headers.items()]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def drain(receive: Receive, limit: int = _DRAIN_LIMIT) -> None:
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

    def __init__(
        self, app: ASGIApp, *, state: ServerState, api_key: str | None, browser: BrowserPolicy | None = None
    ) -> None:
        self.app = app
        self.state = state
        self.api_key = api_key.encode() if api_key else None
        self.browser = browser or BrowserPolicy()

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
        path = scope["path"]
        refused = check_request(scope["method"].encode(), headers, self.browser)
        if refused is not None:  # a foreign Host (DNS rebinding), Origin, or a non-JSON body (CSRF)
            await drain(receive)
            await send_error(counting_send, refused, path)
            return
        keyed = self.api_key is not None and path not in OPEN_PATHS and scope["method"] != "OPTIONS"
        if keyed and not hmac.compare_digest(presented_key(headers), self.api_key or b""):
            await drain(receive)
            msg = "missing or invalid API key: send 'Authorization: Bearer <key>' (or 'x-api-key: <key>')"
            err = ApiError(401, msg, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
            await send_error(counting_send, err, path)
            return
        length = headers.get(b"content-length")
        if length is not None:
            try:
                too_big = int(length) > self.state.max_body_bytes
            except ValueError:
                err = ApiError(400, "invalid Content-Length header", code="invalid_request")
                await send_error(counting_send, err, path)
                return
            if too_big:
                await drain(receive)
                await send_error(counting_send, too_large(self.state.max_body_bytes), path)
                return
        await self.app(scope, receive, counting_send)


def presented_key(headers: dict[bytes, bytes]) -> bytes:
    """The key a request carries: OpenAI's `Authorization: Bearer`, else Anthropic's `x-api-key` (as llama-server
    reads them). b"" when neither is there, which no key matches."""
    scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
    if scheme.lower() == b"bearer":
        return token.strip()
    return headers.get(b"x-api-key", b"").strip()


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body larger than {limit} bytes", code="request_too_large")
