"""What a request runs with, decided the same way by every runtime: Dynamic Draft's choice and the request's class."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from app.engine.config import EngineConfig
from app.engine.types import DynamicDraftRecord, GenerationRequest, InvalidRequest
from app.policy.content_class import RequestClass, last_user_text
from app.policy.dynamic import DecisionRecord, DraftCaps, DynamicDraftPolicy
from app.policy.edit_kind import classify_request
from app.policy.fingerprint import Fingerprint
from app.policy.table import FrontierTable
from app.speculative import registry
from app.speculative.settings import SpecSettings


def policy_without_table(config: EngineConfig, message: str, sources: Collection[str]) -> DynamicDraftPolicy:
    """The policy before (or without) a calibration table: DD decides "no_table" and the engine default for the
    loaded draft `sources` runs (EngineConfig.default_with_basis)."""
    return policy_with_default(config, sources, None, None, load_message=message)


def policy_with_default(
    config: EngineConfig,
    sources: Collection[str],
    table: FrontierTable | None,
    fingerprint: Fingerprint | None,
    load_message: str = "",
    default: tuple[SpecSettings, str] | None = None,
) -> DynamicDraftPolicy:
    """A policy over `table` (None: no table) with this engine's default for the loaded `sources` (or `default`: a
    setting and its basis, as a runtime runs the default) and its DD options."""
    setting, basis = default or config.default_with_basis(sources)
    return DynamicDraftPolicy(
        table,
        fingerprint,
        default=setting,
        default_basis=basis,
        enabled=config.dynamic_draft,
        force=config.dd_force,
        load_message=load_message,
    )


def choose_settings(
    policy: DynamicDraftPolicy,
    caps: DraftCaps,
    n_prompt: int,
    override: SpecSettings | None,
    loaded: Collection[str],
    missing: Mapping[str, str] | None = None,
    content_class: RequestClass | None = None,
) -> tuple[SpecSettings, DecisionRecord]:
    """Dynamic Draft's decision on the exact prompt-token count and the request's class (RequestClass) (every runtime
    decides the same way); `loaded`: the draft sources the runtime has, which an override must be able to run on;
    `missing`: why some others are not there (e.g. "mtp": the file has no MTP layers), said in the refusal."""
    if override is not None and missing and override.source in missing and override.source not in loaded:
        raise InvalidRequest(
            f"speculative.source {override.source!r} needs the model's own head: {missing[override.source]}"
        )
    if override is not None and (why := registry.unavailable(override.source, loaded)):
        raise InvalidRequest(f"speculative.source {override.source!r} {why}")
    if content_class is None:
        return policy.decide(n_prompt, override, caps)
    c = content_class
    return policy.decide(n_prompt, override, caps, c.content_class, c.cue, c.subclass, c.subclass_cue)


def request_class(request: GenerationRequest, text: str) -> RequestClass:
    """The request's content class and the cue that decided it, from its templated prompt `text` (once per
    request; Dynamic Draft and the speculation statistics both use it), and for copy_edit its sub-class from the
    instruction's wording. A grammar (also what response_format and tool_choice become) or tools make it
    structured."""
    structured = request.grammar is not None or bool(request.tools)
    return classify_request(text, last_user_text(request.messages, text), structured)


def wire_record(
    record: DecisionRecord,
    policy: DynamicDraftPolicy,
    status: str,
    disabled: str | None,
    guard: list[dict[str, Any]] | None = None,
) -> DynamicDraftRecord:
    """The decision record as responses carry it: a stale table's differing fields and how to recalibrate (`status`,
    the table's load message), why speculation is off for this model where it is (`disabled`), and when the
    in-request guard turned speculation off and on again (`guard`, where it acted)."""
    out: DynamicDraftRecord = {**record.to_dict()}
    if guard:
        out["guard"] = guard
    if record.reason == "stale_table":
        out["stale_fields"] = list(policy.stale_fields)
        out["stale_message"] = status
    if disabled:
        out["speculation_disabled"] = disabled
    return out
