"""The OpenAI models dialect: the one loaded model, listed and looked up by any of its names."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from app.server.flow import CompletionFlow
from app.server.schemas import ModelCard, ModelList


def install(app: FastAPI, flow: CompletionFlow) -> None:
    state = flow.state

    def card() -> ModelCard:
        return ModelCard(id=state.model_id, created=state.created, meta=state.engine.model_meta.to_json())

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return ModelList(data=[card()]).model_dump()

    @app.get("/v1/models/{model:path}")
    async def get_model(model: str) -> dict[str, Any]:
        flow.check_model(model)
        return card().model_dump()
