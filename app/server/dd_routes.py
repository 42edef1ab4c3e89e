"""DynaDraft's own routes: health (open without a key), Prometheus metrics and the read-only Dynamic Draft table."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from app.server.errors import ApiError
from app.server.state import ServerState


def install(app: FastAPI, state: ServerState) -> None:
    engine = state.engine

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": state.model_id, "queue_depth": engine.queue_depth}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(state.metrics.render(engine.queue_depth), media_type="text/plain; version=0.0.4")

    @app.get("/v1/dynamic-draft/table")
    async def dd_table() -> Any:
        table = state.dd_table_provider() if state.dd_table_provider is not None else None
        if table is None:
            raise ApiError(404, "no Dynamic Draft table is active", code="no_table")
        return table.to_dict() if hasattr(table, "to_dict") else table
