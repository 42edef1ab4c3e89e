"""The EngineConfig that the command line's shared flags describe (generate, serve and calibrate alike)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.engine.config import EngineConfig, config_with_profile
from app.engine.profile import profile_from_args


def config_from_args(args: Any, **extra: Any) -> EngineConfig:
    """The EngineConfig the CLI's shared flags describe (--model, --draft: a path or a local model's name, see
    resolve_model_arg; --server-binary and the engine profile:
    --ctx-size, --batch-size, --threads, --gpu-layers, --flash-attn, resolved by `resolve_profile`, so every
    subcommand gets the same defaults); `extra` sets the rest."""
    from app.models.local import resolve_model_arg

    budget = getattr(args, "reasoning_budget", None)
    draft = getattr(args, "draft", None)
    return config_with_profile(
        str(resolve_model_arg(args.model)),
        str(resolve_model_arg(draft, "--draft")) if draft else None,
        profile_from_args(args),
        server_binary=getattr(args, "server_binary", None),
        chat_template=_read_text(getattr(args, "chat_template_file", None)),
        cache_ram_mib=getattr(args, "cache_ram", None),
        reasoning_budget=-1 if budget is None else budget,
        reasoning_budget_message=getattr(args, "reasoning_budget_message", None) or "",
        **extra,
    )


def _read_text(path: str | None) -> str | None:
    return Path(path).read_text(encoding="utf-8") if path else None
