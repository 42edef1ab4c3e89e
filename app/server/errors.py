"""API errors as one exception type that renders OpenAI's error envelope with the right HTTP status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from app.engine.types import EngineError, QueueFull

# OpenAI's `type` per status, so client libraries map them to their usual exception classes.
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}

ANTHROPIC_PREFIX = "/v1/messages"

RETRY_AFTER_S = 1  # a queued generation of a few hundred tokens frees a slot in about this long on a laptop


class ApiError(Exception):
    """An error the API answers with `{"error": {...}}`; `headers` carries e.g. Retry-After or WWW-Authenticate."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type or _TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def body_for(self, path: str) -> dict[str, Any]:
        """The envelope the route's dialect expects: Anthropic's under /v1/messages (its SDK reads the top-level
        `type` and its own error types), OpenAI's everywhere else."""
        body = self.body()
        if path == ANTHROPIC_PREFIX or path.startswith(ANTHROPIC_PREFIX + "/"):
            kind = "api_error" if self.type == "server_error" else self.type
            message = self.message
            if self.code == "context_length_exceeded":
                message = f"prompt is too long: {message}"  # the words Anthropic's API uses, which its clients match
            return {"type": "error", "error": {**body["error"], "type": kind, "message": message}}
        return body


def from_engine_error(err: EngineError) -> ApiError:
    """Map the engine's typed errors (each with .status and .code) onto API errors; never leaks a traceback."""
    if isinstance(err, QueueFull):
        return ApiError(429, str(err), code=err.code, headers={"Retry-After": str(RETRY_AFTER_S)})
    status = err.status if 400 <= err.status < 600 else 500
    param = "messages" if err.code == "context_length_exceeded" else getattr(err, "param", None)
    return ApiError(status, str(err) or err.code, code=err.code, param=param)


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "literal"}


def _is_type_tag(part: str | int) -> bool:
    # Unions put the tried member type into the error location ("stop.str"); users want just "stop".
    return isinstance(part, str) and (part in _TYPE_TAGS or any(c in part for c in "[](-"))


def from_validation_error(err: ValidationError | Any, prefix: tuple[str | int, ...] = ()) -> ApiError:
    """The first pydantic error as a 400 whose `param` is the dotted field path (e.g. "messages.0.role")."""
    errors = err.errors() if hasattr(err, "errors") else []
    if not errors:
        return ApiError(400, "invalid request", code="invalid_request")
    first = errors[0]
    loc = [p for p in (*prefix, *first.get("loc", ())) if p != "body" and not _is_type_tag(p)]
    param = ".".join(str(p) for p in loc) or None
    kind = first.get("type", "")
    if kind == "json_invalid":
        return ApiError(400, f"the request body is not valid JSON: {first.get('msg', '')}", code="invalid_json")
    msg = first.get("msg", "invalid value")
    more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
    text = f"{param}: {msg}{more}" if param else f"{msg}{more}"
    return ApiError(400, text, code="invalid_request", param=param)
