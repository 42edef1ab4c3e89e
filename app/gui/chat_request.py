"""Chat settings to an engine request, and a finished reply's summary to the stats each message shows."""

from __future__ import annotations

import time
from typing import Any

from app.engine.types import DynamicDraftRecord, GenerationRequest, GenerationSummary
from app.gui.store import Conversation, Message
from app.runtime.sampling import SamplingParams
from app.speculative import registry
from app.speculative.registry import POOL, from_intent
from app.speculative.settings import DEFAULT_N_MAX, DEFAULT_P_MIN, PLAIN, SpecSettings

DEFAULT_CHAT_SETTINGS: dict[str, Any] = {
    "temperature": 0.7,
    "top_p": 0.95,
    "top_k": 40,
    "min_p": 0.05,
    "repeat_penalty": 1.0,
    # llama.cpp's DRY and XTC samplers (app.runtime.sampling), off by default as there
    "dry_multiplier": 0.0,
    "xtc_probability": 0.0,
    "xtc_threshold": 0.1,
    "max_tokens": 512,
    "seed": None,
    "spec_mode": "auto",  # auto (Dynamic Draft / engine default) | off | a registered source (spec_modes())
    "spec_n_max": DEFAULT_N_MAX,
    "spec_p_min": DEFAULT_P_MIN,  # was 0.5 here and 0.0 in HTTP/CLI: one default now (see speculative/settings.py)
    "spec_cost_stop": False,  # the cost stop (SpecSettings.cost_stop) for an explicit source
    "spec_adaptive": False,  # adaptive draft length (SpecSettings.adaptive): n_max is then the ceiling
    # A chat longer than the context window leaves out its oldest turns (GenerationRequest.context_overflow), as
    # LM Studio's rolling window does; "error" stops it with the engine's message instead.
    "context_overflow": "drop_oldest",
    # Thinking: "default" leaves the template alone; "on"/"off" set its enable_thinking (Qwen3-style templates
    # read it; others ignore it), as LM Studio's thinking toggle does. The budget is llama-server's
    # reasoning budget: -1 no limit, N ends the <think> block after N tokens (app.engine.reasoning_budget).
    "thinking": "default",
    "reasoning_budget": -1,
}

THINKING = {
    "default": "Model default",
    "on": "On",
    "off": "Off",
}
"""The thinking choices of a conversation, as the settings dialog names them (enable_thinking for the template)."""

CONTEXT_OVERFLOW = {
    "drop_oldest": "Leave out the oldest messages",
    "error": "Stop with an error",
}
"""The choices for a chat that outgrows the context window, as the settings dialog names them."""


POOL_LABEL = "Pool (the source chosen each step)"


def spec_modes() -> dict[str, str]:
    """The speculation choices of a conversation: auto, off, every registered draft source by its label, then the
    pool (the source chosen each step among those loaded)."""
    sources = {cls.name: cls.label for cls in registry.sources()}
    return {"auto": "Auto (Dynamic Draft)", "off": "Off (plain decoding)"} | sources | {POOL: POOL_LABEL}


def chat_settings(conv: Conversation) -> dict[str, Any]:
    """The conversation's settings with defaults filled in (older rows may lack newer keys)."""
    return {**DEFAULT_CHAT_SETTINGS, **(conv.settings or {})}


def spec_from_settings(s: dict[str, Any]) -> SpecSettings | None:
    """None lets Dynamic Draft (or the engine default) decide; otherwise an explicit request override."""
    mode = s.get("spec_mode", "auto")
    if mode == "auto":
        return None
    if mode == "off":
        return PLAIN
    return from_intent(
        mode,
        n_max=int(s["spec_n_max"]),
        p_min=float(s["spec_p_min"]),
        cost_stop=bool(s.get("spec_cost_stop", False)),
        adaptive=bool(s.get("spec_adaptive", False)),
    )


def build_request(conv: Conversation, history: list[Message]) -> GenerationRequest:
    """The engine request for a conversation: system prompt + user/assistant turns, with its sampling settings."""
    s = chat_settings(conv)
    msgs: list[dict[str, str]] = []
    if conv.system_prompt.strip():
        msgs.append({"role": "system", "content": conv.system_prompt})
    msgs += [{"role": m.role, "content": m.content} for m in history if m.role in ("user", "assistant")]
    seed = s.get("seed")
    thinking = s.get("thinking")
    budget = int(s.get("reasoning_budget", -1))
    return GenerationRequest(
        messages=tuple(msgs),
        max_tokens=int(s["max_tokens"]),
        sampling=SamplingParams(
            temperature=float(s["temperature"]),
            top_k=int(s["top_k"]),
            top_p=float(s["top_p"]),
            min_p=float(s["min_p"]),
            repeat_penalty=float(s["repeat_penalty"]),
            dry_multiplier=float(s["dry_multiplier"]),
            xtc_probability=float(s["xtc_probability"]),
            xtc_threshold=float(s["xtc_threshold"]),
            seed=None if seed in (None, "") else int(seed),
        ),
        speculative=spec_from_settings(s),
        request_id=f"gui-{conv.id}-{int(time.time() * 1000)}",
        context_overflow="error" if s.get("context_overflow") == "error" else "drop_oldest",
        echo_open_think=True,  # a template that opens <think> in the prompt: the reply still shows its thinking
        template_kwargs={"enable_thinking": thinking == "on"} if thinking in ("on", "off") else None,
        reasoning_budget=budget,  # -1 is "No limit" even where the engine was started with a budget
    )


def reply_stats(summary: GenerationSummary, ttft_s: float | None) -> dict[str, Any]:
    """What each reply shows and persists: speed, latency, acceptance and the Dynamic Draft decision."""
    t = summary.timings
    dd: DynamicDraftRecord | dict[str, Any] = summary.dynamic_draft or {}
    selected = dd.get("selected")
    try:
        dd_label = SpecSettings.from_dict(selected).label() if isinstance(selected, dict) else summary.settings.label()
    except (TypeError, ValueError):
        dd_label = summary.settings.label()
    return {
        "tokens": t.predicted_n,
        "tok_s": t.predicted_per_second,
        "ttft_ms": round(ttft_s * 1000.0, 1) if ttft_s is not None else None,
        "prompt_tokens": summary.prompt_tokens,
        "prompt_ms": t.prompt_ms,
        "cached_tokens": t.cache_n,  # prompt tokens the conversation cache gave for free
        "draft_n": t.draft_n,
        "draft_accepted": t.draft_n_accepted,
        "acceptance": (t.draft_n_accepted / t.draft_n) if t.draft_n else None,
        "steps": summary.steps,
        "finish_reason": summary.finish_reason,
        "dropped_messages": summary.dropped_messages,
        "spec": summary.settings.label(),
        "reasoning": summary.reasoning,  # with a thinking budget: its tokens, and whether the block was ended
        "dd": {
            "applied": bool(dd.get("applied")),
            "reason": dd.get("reason"),
            "setting": dd_label,
            "content_class": dd.get("content_class"),
            "class_basis": dd.get("class_basis"),
            "content_subclass": dd.get("content_subclass"),
            "catch_up_ms": dd.get("catch_up_ms"),
            "passed_over": dd.get("passed_over"),
            "default_basis": dd.get("default_basis"),
            "guard": dd.get("guard"),
        },
    }


def context_used(stats: dict[str, Any]) -> int | None:
    """The tokens of the context window a reply's request filled: its prompt and its answer (None when unknown)."""
    prompt = stats.get("prompt_tokens")
    return int(prompt) + int(stats.get("tokens") or 0) if isinstance(prompt, int) else None


_BASIS_WORDS = {"subclass_row": "its own row", "class_row": "its own row", "class_fallback": "context-only row"}


def class_label(dd: dict[str, Any]) -> str:
    """The content class part of a decision, e.g. "copy_edit, its own row", "copy_edit/near_copy, its own row" or
    "copy_edit/additive, copy_edit's row" (a sub-class without rows) ("" when the record has no class)."""
    cls = dd.get("content_class")
    if not cls:
        return ""
    sub = dd.get("content_subclass")
    basis = _BASIS_WORDS.get(dd.get("class_basis") or "")
    if sub and dd.get("class_basis") == "class_row":
        basis = f"{cls}'s row"
    name = f"{cls}/{sub}" if sub else str(cls)
    return f"{name}, {basis}" if basis else name


def guard_note(events: list[dict[str, Any]] | None) -> str:
    """What the in-request guard did, e.g. "guard: plain from token 12 (13 vs 65 tok/s), 1 probe" ("" if nothing)."""
    pauses = [e for e in events or () if e.get("action") == "plain"]
    if not pauses:
        return ""
    first = pauses[0]
    note = f"guard: plain from token {first['token']} ({first['spec_tok_s']:.0f} vs {first['plain_tok_s']:.0f} tok/s)"
    probes = sum(1 for e in events or () if e.get("action") == "probe")
    return note + (f", {probes} probe{'s' if probes != 1 else ''}" if probes else "")


def format_stats(stats: dict[str, Any]) -> str:
    """One line for a reply's footer."""
    parts = [f"{stats.get('tok_s') or 0:.1f} tok/s"]
    if stats.get("ttft_ms") is not None:
        parts.append(f"first token {stats['ttft_ms']:.0f} ms")
    if stats.get("acceptance") is not None:
        parts.append(f"acceptance {stats['acceptance']:.0%} ({stats['draft_accepted']}/{stats['draft_n']})")
    else:
        parts.append("no drafts")
    parts.append(f"{stats.get('tokens', 0)} tokens")
    if stats.get("cached_tokens"):
        parts.append(f"cached {stats['cached_tokens']} tokens")
    budget = stats.get("reasoning") or {}
    if budget.get("forced"):
        parts.append(f"thinking ended at its budget of {budget.get('budget_tokens')} tokens")
    elif budget.get("note"):
        parts.append(f"thinking budget not applied: {budget['note']}")
    if n := stats.get("dropped_messages"):
        parts.append(f"{n} oldest message{'s' if n != 1 else ''} left out: the context window is full")
    dd = stats.get("dd") or {}
    state = "on" if dd.get("applied") else "off"
    why = dd.get("reason") or "n/a"
    if dd.get("passed_over"):  # DD passed over a draft-model row whose draft would first prefill the prompt
        ms = dd.get("catch_up_ms") or 0.0
        note = f"not the draft model's {dd['passed_over']}: it would first prefill the prompt, ~{ms:.0f} ms"
        why = note if why == "catch_up" else f"{why}; {note}"  # force mode keeps saying "forced"
    if dd.get("default_basis") and why in ("no_table", "stale_table", "disabled"):  # what the engine's default was
        why += f": {dd['default_basis']}"
    if cls := class_label(dd):
        why += f"; {cls}"
    if guard := guard_note(dd.get("guard")):
        why += f"; {guard}"
    parts.append(f"DD {state}: {dd.get('setting', stats.get('spec', '?'))} ({why})")
    if stats.get("finish_reason") == "cancelled":
        parts.append("stopped")
    elif stats.get("finish_reason") == "length":
        parts.append("hit max tokens")
    return " · ".join(parts)
