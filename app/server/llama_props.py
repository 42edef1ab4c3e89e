"""llama-server's /props: the context window, template and build, where its clients and web UIs look for them."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from app.runtime.dry import DEFAULT_BREAKERS
from app.runtime.llama_server import SAMPLING_FIELDS
from app.runtime.sampling import SamplingParams
from app.server.openai_common import DEFAULT_TEMPERATURE
from app.server.state import ServerState


def props(state: ServerState) -> dict[str, Any]:
    """The subset of llama-server's /props that describes this endpoint (one slot, text only, never asleep)."""
    meta = state.engine.model_meta
    return {
        "default_generation_settings": {"n_ctx": meta.n_ctx, "params": default_params(state)},
        "total_slots": 1,
        "model_alias": state.model_id,
        "model_path": state.engine.config.model,
        "modalities": {"vision": False, "audio": False},
        "chat_template": meta.chat_template,
        "bos_token": meta.bos_token,
        "eos_token": meta.eos_token,
        "build_info": f"DynaDraft ({meta.build})" if meta.build else "DynaDraft",
        "is_sleeping": False,
    }


def default_params(state: ServerState) -> dict[str, Any]:
    """What a request that sets no sampling field gets (llama-server's `params`, which its web UI reads): the
    sampler's neutral values, OpenAI's temperature 1, then serve's sampler flags."""
    neutral = SamplingParams()
    params: dict[str, Any] = {f: getattr(neutral, f) for f in SAMPLING_FIELDS if f != "seed"}
    params["temperature"] = DEFAULT_TEMPERATURE
    params["dry_sequence_breakers"] = list(DEFAULT_BREAKERS)
    return params | state.sampling_defaults


def install(app: FastAPI, state: ServerState) -> None:
    @app.get("/props")
    async def get_props() -> dict[str, Any]:
        return props(state)
