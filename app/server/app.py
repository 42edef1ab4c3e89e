"""The FastAPI app factory: the guard, the error handlers, and one module of routes per dialect."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from app.engine.worker import Engine
from app.server import (
    anthropic_messages,
    dd_routes,
    llama_completion,
    llama_props,
    llama_template,
    llama_tokens,
    openai_chat,
    openai_completions,
    openai_models,
    openai_responses,
)
from app.server.browser_guard import BrowserPolicy
from app.server.error_handlers import install_error_handlers
from app.server.flow import CompletionFlow
from app.server.metrics import Metrics
from app.server.middleware import DEFAULT_MAX_BODY_BYTES, GuardMiddleware
from app.server.state import DDTableProvider, ServerState


def _model_aliases(model_id: str, model_path: str, extra: Iterable[str]) -> frozenset[str]:
    p = Path(model_path)
    return frozenset({model_id, p.name, p.stem, *extra})


def create_app(
    engine: Engine,
    model_id: str | None = None,
    *,
    api_key: str | None = None,
    cors_origins: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    dd_table_provider: DDTableProvider | None = None,
    aliases: Iterable[str] = (),
    metrics: Metrics | None = None,
    browser: BrowserPolicy | None = None,
    sampling_defaults: dict[str, Any] | None = None,
) -> FastAPI:
    """Build the API around one loaded Engine. Binding, threads and start/stop live in `runner.EndpointServer`.

    `browser` defaults to a loopback server's policy: Host must name this machine, Origin must be a CORS origin.
    """
    config = engine.config
    model_id = model_id or Path(config.model).stem
    state = ServerState(
        engine=engine,
        model_id=model_id,
        aliases=_model_aliases(model_id, config.model, aliases),
        max_body_bytes=max_body_bytes,
        metrics=metrics or Metrics(),
        dd_table_provider=dd_table_provider,
        sampling_defaults=dict(sampling_defaults or {}),
    )
    app = FastAPI(title="DynaDraft", description="Local OpenAI-compatible endpoint", docs_url=None, redoc_url=None)
    app.state.dynadraft = state
    install_error_handlers(app)
    flow = CompletionFlow(state)
    dd_routes.install(app, state)
    openai_models.install(app, flow)
    llama_props.install(app, state)
    llama_tokens.install(app, state)
    llama_template.install(app, state)
    openai_chat.install(app, flow)
    openai_completions.install(app, flow)
    llama_completion.install(app, flow)
    anthropic_messages.install(app, flow)
    openai_responses.install(app, flow)
    browser = browser or BrowserPolicy.for_bind(True, cors_origins)
    app.add_middleware(GuardMiddleware, state=state, api_key=api_key, browser=browser)
    if cors_origins:
        # Added last so it is outermost: preflights are answered without a key, and errors carry CORS headers.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "x-api-key", "anthropic-version", "anthropic-beta"],
        )
    return app
