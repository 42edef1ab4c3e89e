"""What a session loads: the target and its context, a draft model, every draft source that can run here, the cache."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from app.engine.cache import MIB, Attachment, ConversationCache
from app.engine.config import MTP_MODES, EngineConfig
from app.engine.profile import allocation_note, context_window
from app.runtime.device import resolve_flash_attn
from app.runtime.llama import Context, ContextParams, LlamaError, Model, ModelParams
from app.speculative import registry
from app.speculative.sources import DraftSource, SourceEnv, load_draft_model


@dataclass
class Loaded:
    """A session's llama.cpp parts; `close` frees them (the draft sources own the draft model's context)."""

    model: Model
    ctx: Context
    draft_model: Model | None
    draft_ctx: Context | None
    sources: dict[str, DraftSource]  # every registered source that can run here, in registry order
    missing: dict[str, str]  # why each registered source that needs no draft model is not here
    context_notes: tuple[str, ...]  # what the context window is, where it is not what was asked
    depth_cap: int  # no draft goes deeper (see DraftCaps)
    flash_attn: str

    def close(self) -> None:
        for src in self.sources.values():
            src.close()
        self.ctx.close()
        if self.draft_model is not None:
            self.draft_model.close()
        self.model.close()


def load(config: EngineConfig) -> Loaded:
    """Load the target, its context, the draft model and the sources; frees what it loaded when a later part fails."""
    if config.mtp not in MTP_MODES:
        raise LlamaError(f"mtp must be one of {', '.join(MTP_MODES)}")
    depth_cap = min(config.draft_n_max_cap, config.n_batch - 1, 64)
    ctx_params = ContextParams(
        n_ctx=config.n_ctx,
        n_batch=config.n_batch,
        n_threads=config.n_threads,
        flash_attn=resolve_flash_attn(config.flash_attn, config.n_gpu_layers),
        type_k=config.type_k,
        type_v=config.type_v,
        # Recurrent/hybrid targets (Qwen3.5/3.6) keep a state snapshot per token of the last decode, so a
        # rejected draft rolls back in place: on the H200 the full checkpoint this replaces cost 108-738 MB and
        # 0.17-1.2 s per speculative step (bench/results/2026-12-01-h200-mtp.md). llama.cpp grants none on
        # models without recurrent memory.
        n_rs_seq=min(depth_cap, max(0, config.recurrent_snapshots)),
    )
    modes = {cls.name: config.source_mode(cls.name) for cls in registry.sources()}
    flags = {f: True for cls in registry.sources() if modes[cls.name] != "off" for f in registry.load_flags(cls)}
    model = Model(config.model, ModelParams(config.n_gpu_layers, config.use_extra_bufts, **flags))
    n_ctx, note = context_window(config.n_ctx, model.n_ctx_train)
    ctx_params = replace(ctx_params, n_ctx=n_ctx)
    try:
        ctx = Context(model, ctx_params)
    except LlamaError:
        model.close()
        raise
    notes = tuple(n for n in (note, allocation_note(n_ctx, ctx.n_ctx)) if n)
    loaded = Loaded(model, ctx, None, None, {}, {}, notes, depth_cap, ctx_params.flash_attn)
    try:
        if config.draft:
            layers = config.n_gpu_layers if config.draft_n_gpu_layers is None else config.draft_n_gpu_layers
            loaded.draft_model, loaded.draft_ctx = load_draft_model(  # the draft source checkpoints its own state
                model, config.draft, replace(ctx_params, n_rs_seq=0), ModelParams(layers, config.use_extra_bufts)
            )
        env = SourceEnv(model, ctx, loaded.draft_ctx)
        for cls in registry.sources():
            source = cls.create(env)
            if source is not None:
                loaded.sources[cls.name] = source
        loaded.missing = missing_sources(model, loaded.sources)
        for name, mode in modes.items():
            if mode == "on" and name in loaded.missing:
                raise LlamaError(f"--{name}: {loaded.missing[name]}")
    except BaseException:
        loaded.close()
        raise
    return loaded


def missing_sources(model: Model, sources: dict[str, DraftSource]) -> dict[str, str]:
    """Why each registered source that needs no draft model is not here (the MTP head of a file without one)."""
    out = {}
    for cls in registry.sources():
        if cls.name not in sources and not cls.needs_draft_model:
            out[cls.name] = registry.unavailable_reason(cls, model) or "it cannot run on this model"
    return out


def open_cache(config: EngineConfig, loaded: Loaded) -> ConversationCache:
    """The conversation cache over the target's context and the draft model's (the same rule for both)."""
    contexts = {"target": loaded.ctx}
    if loaded.draft_ctx is not None:
        contexts["draft"] = loaded.draft_ctx
    disk = None
    if config.cache_dir:
        from app.engine.cache_disk import DiskStore, session_identity

        label = Path(config.model).name + (f" + {Path(config.draft).name}" if config.draft else "")
        identity = session_identity(config, loaded.ctx.n_ctx, loaded.flash_attn)
        total = config.cache_disk_total_mib * MIB
        disk = DiskStore(Path(config.cache_dir), identity, label=label, total_max_bytes=total)
    # A source's state that lives beside the target's memory (the MTP head's context and rows) comes back with the
    # target's checkpoints, else it drafts nothing there. The cache holds one attachment per context.
    attached = [src for src in loaded.sources.values() if getattr(type(src), "cache_attachment", False)]
    attachments: dict[str, Attachment] | None = {"target": attached[0]} if attached else None  # type: ignore[dict-item]
    return ConversationCache.open(config.cache_ram_mib, config.cache_checkpoints, contexts, disk, attachments)
