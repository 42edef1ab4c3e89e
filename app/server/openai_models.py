"""The models route (OpenAI's and Anthropic's shape at once): the one loaded model, listed and looked up by name."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI

from app.server.flow import CompletionFlow
from app.server.schemas import ModelCard, ModelList


def install(app: FastAPI, flow: CompletionFlow) -> None:
    state = flow.state

    def card() -> ModelCard:
        created_at = datetime.fromtimestamp(state.created, UTC).isoformat().replace("+00:00", "Z")
        meta = state.engine.model_meta.to_json()
        return ModelCard(
            id=state.model_id,
            created=state.created,
            meta=meta,
            display_name=state.model_id,
            created_at=created_at,
            max_input_tokens=meta["n_ctx"],
        )

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        only = card()
        return ModelList(data=[only], first_id=only.id, last_id=only.id).model_dump()

    @app.get("/v1/models/{model:path}")
    async def get_model(model: str) -> dict[str, Any]:
        flow.check_model(model)
        return card().model_dump()
