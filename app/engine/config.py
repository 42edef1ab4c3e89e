"""What an engine loads and how: EngineConfig, and its engine profile (context, batch, threads, offload)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from app.engine.cache_usage import DEFAULT_TOTAL_MIB
from app.engine.profile import EngineProfile
from app.speculative import registry
from app.speculative.settings import PLAIN, SpecSettings

MTP_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class EngineConfig:
    """What to load and how: the target, an optional draft, context sizes, threads, offload and draft caps."""

    model: str
    draft: str | None = None
    n_ctx: int = 4096
    n_batch: int = 512
    n_threads: int = 0
    n_gpu_layers: int = 0
    draft_n_gpu_layers: int | None = None  # None: same as the target
    flash_attn: str = "auto"  # "auto" | "on" | "off", as llama.cpp's -fa
    type_k: str = "f16"
    type_v: str = "f16"
    use_extra_bufts: bool = True
    draft_n_max_cap: int = 16  # the server's draft allocation: nothing drafts deeper than this
    # How many per-token recurrent-state snapshots llama.cpp keeps (n_rs_seq; 0: none), so recurrent/hybrid memory
    # rolls a rejected draft back in place rather than from a full checkpoint saved before the step; drafts deeper
    # than this still take the checkpoint. Not the draft cap: every snapshot slot costs the recurrent state in memory,
    # and the pinned llama.cpp writes every slot's conv state on every decode (n_rs_seq + 1 copies per Gated DeltaNet
    # layer, plain decoding included). On the H200, MTP n2 on the Qwen3.6-35B shape ran 1.31x faster with 4 than with
    # 16 (bench/results/2026-12-01-h200-mtp.md); 8 covers the MTP grid (n <= 6) and the common draft depths.
    recurrent_snapshots: int = 8
    dynamic_draft: bool = True  # apply the calibrated table when one matches this engine's fingerprint
    dd_force: bool = False  # force mode: DD's choice wins over request-level speculative fields
    # The in-request guard (app.speculative.guard): a fixed setting that DD or the default chose decodes plain for a
    # while where it realizes fewer tokens per ms than plain decoding.
    spec_guard: bool = True
    # The target's multi-token-prediction head as the "mtp" draft source: "auto" loads it when the GGUF has one,
    # "on" refuses a GGUF without, "off" never loads it (saves the head's weights and its context).
    mtp: str = "auto"
    # Used when neither the request nor Dynamic Draft chooses (no table, DD off): None picks by what is loaded
    # (default_spec_for). default_cost_stop: that default stops drafts by measured cost instead of p_min (--cost-stop).
    default_spec: SpecSettings | None = None
    default_cost_stop: bool = False
    # An external (fork) llama-server binary to run the model with instead of the bundled library (app/engine/external)
    server_binary: str | None = None
    chat_template: str | None = None  # a Jinja chat template used instead of the GGUF's own (--chat-template-file)
    # Conversation cache (app/engine/cache.py): host-RAM budget in MiB as llama-server's --cache-ram (None or -1:
    # sized from free memory, 0: off), checkpoints kept per conversation on recurrent/hybrid models, and a folder
    # to persist it in across restarts (the app's; None: RAM only), where every model's folders together keep at most
    # cache_disk_total_mib (the least recently used go first; `dynadraft cache` lists and clears them).
    cache_ram_mib: int | None = None
    cache_checkpoints: int = 4
    cache_dir: str | None = None
    cache_disk_total_mib: int = DEFAULT_TOTAL_MIB
    # Remember per content class how each draft source did, beside the calibration tables, and warm-start each
    # request's pool / adaptive length from it (app/engine/memory.py).
    source_memory: bool = True
    # The reasoning budget a request gets when it gives none (llama-server's --reasoning-budget; -1: no limit) and
    # the message committed before a forced closing tag (--reasoning-budget-message).
    reasoning_budget: int = -1
    reasoning_budget_message: str = ""

    def source_mode(self, name: str) -> str:
        """A registered source's load mode: "auto" (where the model allows), "on" (refuse a model it cannot run on)
        or "off" (never load what it needs). Only the MTP head has a setting (`mtp`, --mtp); every other is "auto"."""
        return self.mtp if name == "mtp" else "auto"

    def default_with_basis(self, sources: Collection[str]) -> tuple[SpecSettings, str]:
        """(the default setting, why it is the default: the decision record's `default_basis`)."""
        spec, basis = (self.default_spec, "configured default") if self.default_spec else default_spec_for(sources)
        if self.default_cost_stop and not spec.is_plain:
            # The cost stop replaces the default's fixed confidence stop rather than adding to it.
            spec, basis = spec.with_(cost_stop=True, p_min=0.0), basis + ", cost stop"
        return spec, basis


def default_spec_for(sources: Collection[str]) -> tuple[SpecSettings, str]:
    """The engine default by what is loaded: a draft model drafts as llama-server's -md does (n16, p_min 0.75); else
    the model's own MTP head drafts with adaptive depth up to its default (3, as llama.cpp's MTP examples), which
    drops to plain where acceptance does not pay; else plain decoding. Not prompt lookup: on this project's 2-core
    CPU a lookup default (n8, under the in-request guard) ran chat prompts at 0.77x plain and copy-edits at 0.91x,
    drafting 40-56 tokens of 96 on a chat and accepting 0-5 (bench/results/2026-12-07-defaults.md); it must draft
    on better evidence first."""
    if "draft" in sources:
        return SpecSettings(source="draft", n_max=16, n_min=0, p_min=0.75), "draft default"
    if "mtp" in sources:
        return SpecSettings(source="mtp", n_max=registry.default_n_max("mtp"), adaptive=True), "mtp default"
    return PLAIN, "plain default"


def config_with_profile(model: str, draft: str | None, profile: EngineProfile, **extra: Any) -> EngineConfig:
    """An EngineConfig running `profile` (the CLI and the app build theirs here)."""
    return EngineConfig(
        model=model,
        draft=draft,
        n_ctx=profile.n_ctx,
        n_batch=profile.n_batch,
        n_threads=profile.n_threads,
        n_gpu_layers=profile.n_gpu_layers,
        flash_attn=profile.flash_attn,
        **extra,
    )


def profile_of(config: EngineConfig) -> EngineProfile:
    return EngineProfile(config.n_ctx, config.n_gpu_layers, config.flash_attn, config.n_batch, config.n_threads)
