"""The engine profile: context size, GPU layers, flash attention, batch and threads, resolved one way everywhere.

`dynadraft generate`, `serve`, `calibrate` and the app all call `resolve_profile` with whatever the user set (None
for "not set"), so a table calibrated with defaults applies to every other entry point run with defaults.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.policy.fingerprint import FLASH_ATTN_MODES
from app.runtime.device import ALL_LAYERS, default_gpu_layers

DEFAULT_CTX = 4096
CTX_FROM_MODEL = 0  # --ctx-size 0: the model's training context, as llama.cpp's `-c 0`
DEFAULT_BATCH = 512
DEFAULT_THREADS = 0  # all cores
DEFAULT_FLASH_ATTN = "auto"  # as llama.cpp's -fa
# llama.cpp reads any n_gpu_layers at or above the layer count (999 by convention) as "all", like a negative value.
ALL_LAYERS_AT = 999


def normalise_gpu_layers(n: int, n_layer: int | None = None) -> int:
    """One value for "every layer": -1, 999 and (when the layer count is known) anything >= it all become -1."""
    if n < 0 or n >= ALL_LAYERS_AT or (n_layer is not None and n >= n_layer > 0):
        return ALL_LAYERS
    return n


@dataclass(frozen=True)
class EngineProfile:
    """How the engine runs a model: what the CLI flags and the app's model dialog set."""

    n_ctx: int = DEFAULT_CTX
    n_gpu_layers: int = 0
    flash_attn: str = DEFAULT_FLASH_ATTN
    n_batch: int = DEFAULT_BATCH
    n_threads: int = DEFAULT_THREADS

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> EngineProfile | None:
        """A remembered profile (the app's settings); None for anything malformed, so the defaults apply."""
        if not isinstance(data, dict):
            return None
        try:
            return resolve_profile(
                ctx_size=int(data["n_ctx"]),
                gpu_layers=int(data["n_gpu_layers"]),
                flash_attn=str(data["flash_attn"]),
                batch_size=int(data["n_batch"]),
                threads=int(data["n_threads"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


def resolve_profile(
    *,
    ctx_size: int | None = None,
    gpu_layers: int | None = None,
    flash_attn: str | None = None,
    batch_size: int | None = None,
    threads: int | None = None,
    devices: Sequence[Any] | None = None,
) -> EngineProfile:
    """The profile for what the user set; None (or 0 for the batch size) means the default. A context size of 0
    means the model's training context (llama.cpp's `-c 0`), known once the model is loaded (`context_window`).

    GPU layers default to device detection (`default_gpu_layers`: every layer when a real GPU is there, 0 on a
    CPU-only machine); an explicit value always wins. Raises ValueError for values llama.cpp would refuse.
    """
    fa = flash_attn or DEFAULT_FLASH_ATTN
    if fa not in FLASH_ATTN_MODES:
        raise ValueError(f"flash attention must be one of {', '.join(FLASH_ATTN_MODES)}")
    n_ctx = DEFAULT_CTX if ctx_size is None else ctx_size
    n_batch = batch_size or DEFAULT_BATCH
    if (n_ctx != CTX_FROM_MODEL and n_ctx < 16) or n_batch < 1 or (threads or 0) < 0:
        raise ValueError(
            "context size must be >= 16 (or 0: the model's training context), batch size >= 1 and threads >= 0"
        )
    layers = default_gpu_layers(devices) if gpu_layers is None else gpu_layers
    return EngineProfile(n_ctx, normalise_gpu_layers(layers), fa, n_batch, threads or DEFAULT_THREADS)


def context_window(requested: int, n_ctx_train: int) -> tuple[int, str | None]:
    """The context window to allocate when `requested` tokens were asked for (0: the model's training context)
    and the model was trained on `n_ctx_train` (0: it does not say), with a note when that is not what was asked.

    Beyond the training context the model has never seen a position: llama-server caps each slot there (with a
    warning), so DynaDraft caps it too, and at allocation, so the KV cache is not sized for positions it will not
    use. llama.cpp then rounds the window up to a multiple of 256 (`allocation_note`).
    """
    if requested == CTX_FROM_MODEL:
        if n_ctx_train > 0:
            return n_ctx_train, f"context window {n_ctx_train} tokens: the model's training context (--ctx-size 0)"
        return DEFAULT_CTX, f"context window {DEFAULT_CTX} tokens: the model does not say its training context"
    if 0 < n_ctx_train < requested:
        return (
            n_ctx_train,
            f"context capped to {n_ctx_train} tokens, the model's training context ({requested} asked)",
        )
    return requested, None


def allocation_note(asked: int, got: int) -> str | None:
    """A note when llama.cpp allocated a different window than asked (it pads n_ctx to a multiple of 256)."""
    if got == asked:
        return None
    return f"context window {got} tokens: llama.cpp rounds {asked} up to a multiple of 256"


def profile_from_args(args: Any) -> EngineProfile:
    """The profile of a subcommand's shared flags (--ctx-size, --gpu-layers, --flash-attn, --batch-size, --threads)."""
    return resolve_profile(
        ctx_size=getattr(args, "ctx_size", None),
        gpu_layers=getattr(args, "gpu_layers", None),
        flash_attn=getattr(args, "flash_attn", None),
        batch_size=getattr(args, "batch_size", None),
        threads=getattr(args, "threads", None),
    )


def profile_flags(profile: EngineProfile) -> list[str]:
    """The CLI flags that reproduce `profile` (only those that differ from what detection gives by default)."""
    base = resolve_profile()
    out: list[str] = []
    if profile.n_ctx != base.n_ctx:
        out += ["--ctx-size", str(profile.n_ctx)]
    if profile.n_gpu_layers != base.n_gpu_layers:
        out += ["--gpu-layers", str(profile.n_gpu_layers)]
    if profile.flash_attn != base.flash_attn:
        out += ["--flash-attn", profile.flash_attn]
    if profile.n_threads != base.n_threads:
        out += ["--threads", str(profile.n_threads)]
    return out


def recalibrate_command(model: str, draft: str | None, profile: EngineProfile) -> str:
    """The command that calibrates this exact model pair and profile, for stale-table messages."""
    cmd = ["dynadraft", "calibrate", "--model", model, *(["--draft", draft] if draft else []), "--quick"]
    return shlex.join(cmd + profile_flags(profile))
