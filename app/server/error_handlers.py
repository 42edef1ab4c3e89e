"""Every error leaves the server as its dialect's JSON error body (never a traceback, never FastAPI's 422)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.engine.types import EngineError
from app.server.body import ClientGone
from app.server.errors import ApiError, from_engine_error, from_validation_error

log = logging.getLogger(__name__)


def _respond(request: Request, err: ApiError) -> JSONResponse:
    return JSONResponse(err.body_for(request.url.path), status_code=err.status, headers=err.headers or None)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _respond(request, exc)

    @app.exception_handler(ClientGone)
    async def client_gone(_: Request, __: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it; nginx's "client closed request"

    @app.exception_handler(EngineError)
    async def engine_error(request: Request, exc: EngineError) -> JSONResponse:
        return _respond(request, from_engine_error(exc))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _respond(request, from_validation_error(exc))  # FastAPI says 422; OpenAI clients expect 400

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        headers = getattr(exc, "headers", None) or {}
        return _respond(request, ApiError(exc.status_code, str(exc.detail), code=code, headers=headers))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error in the HTTP endpoint")
        return _respond(request, ApiError(500, f"internal server error ({type(exc).__name__})", code="internal_error"))
