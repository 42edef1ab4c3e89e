"""llama-server's POST /apply-template: a chat request's prompt as the model's template renders it; its token count."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI, Request

from app.engine.types import EngineError, GenerationRequest
from app.server.body import parse_body
from app.server.errors import from_engine_error
from app.server.openai_chat import chat_to_generation
from app.server.schemas import ChatCompletionRequest
from app.server.state import ServerState


class ApplyTemplateBody(ChatCompletionRequest):
    """A chat completion's body; `model` may be left out, as llama-server's /apply-template allows."""

    model: str = ""


async def count_prompt_tokens(state: ServerState, gen: GenerationRequest) -> int:
    """A chat request's prompt tokens, exactly those the runtime will see, counted off the engine thread: clients
    ask before they send (Anthropic's count_tokens, OpenAI's input_tokens) and must not wait behind a generation."""
    try:
        tokens, _ = await asyncio.to_thread(state.engine.templated, gen)
    except EngineError as e:
        raise from_engine_error(e) from None
    return len(tokens)


def install(app: FastAPI, state: ServerState) -> None:
    @app.post("/apply-template")
    async def post_apply_template(request: Request) -> dict[str, Any]:
        # The body of a chat completion, checked as one (what a chat request would refuse is refused here too), and
        # rendered with its tools and chat_template_kwargs: the text /v1/completions would then be given as its
        # prompt. Off the event loop and without queueing behind a generation, as llama-server answers it.
        req = await parse_body(request, ApplyTemplateBody, state.max_body_bytes)
        gen = chat_to_generation(req, sources=state.sources)
        try:
            return {"prompt": await asyncio.to_thread(state.engine.render_prompt, gen)}
        except EngineError as e:
            raise from_engine_error(e) from None
