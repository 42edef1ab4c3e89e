"""Dynamic Draft on an external llama-server: its identity, tables, draft sources and flags, the lifetime setting."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

from app.engine.identity import cached_sha256, config_fingerprint
from app.policy.dynamic import DraftCaps, DynamicDraftPolicy
from app.policy.fingerprint import Fingerprint
from app.policy.store import calibration_store
from app.runtime.llama_server import (
    SPECULATIVE_FIELDS,
    CliDialect,
    ExternalServerError,
    ServerFeatures,
    resolve_binary,
)
from app.runtime.threads import resolve_threads
from app.speculative.settings import SpecSettings

if TYPE_CHECKING:
    from app.engine.config import EngineConfig
    from app.models.inspection import GGUFReport
    from app.policy.store import TableStore
    from app.policy.table import FrontierTable

# DynaDraft's prompt lookup is llama.cpp's n-gram drafting without a draft model. `ngram-simple` is the same idea
# (find the latest earlier occurrence of the last n tokens, propose what followed, up to m tokens); `ngram-mod` is
# a hashed n-gram model of everything seen (24-token matches by default), a different source, so it is not used.
LOOKUP_SPEC_TYPE = "ngram-simple"
LOOKUP_NGRAM = 4  # the longest n-gram DynaDraft's own lookup tries (PromptLookupSource's default)
# The model's own multi-token-prediction (MTP/NextN) head drafting for it: the fork's `draft-mtp` builds a draft
# context over the target's own weights (tools/server/server-context.cpp), so no draft model (-md) is loaded.
MTP_SPEC_TYPE = "draft-mtp"
# DynaDraft's draft sources that a build runs as its own --spec-type, without a draft model: their flags are start
# flags of their own (spec_type_args), and a server runs one of them at a time.
OWN_SPEC_TYPES = {"lookup": LOOKUP_SPEC_TYPE, "mtp": MTP_SPEC_TYPE}
_SPEC_TYPE_RE = re.compile(r"\b(?:none|draft-[a-z]+|ngram-[a-z0-9-]+)\b")


class ServerRun(Protocol):
    """What this module reads of a running external session (app/engine/external.ExternalSession)."""

    @property
    def config(self) -> EngineConfig: ...

    @property
    def features(self) -> ServerFeatures: ...

    @property
    def n_ctx(self) -> int: ...

    @property
    def caps(self) -> DraftCaps: ...

    @property
    def sources(self) -> tuple[str, ...]: ...


@lru_cache(maxsize=16)
def _help_text(binary: str, mtime_ns: int) -> str:
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, errors="replace", timeout=30, check=False)
    return out.stdout + out.stderr


def spec_types(binary: str) -> tuple[str, ...]:
    """The `--spec-type` values a llama-server build offers (from its --help; empty for builds without the flag)."""
    path = resolve_binary(binary)
    text = _help_text(str(path), path.stat().st_mtime_ns)
    line = next((ln for ln in text.splitlines() if "--spec-type" in ln), "")
    return tuple(dict.fromkeys(_SPEC_TYPE_RE.findall(line)))


def spec_type_args(binary: str, setting: SpecSettings) -> tuple[str, ...]:
    """Server flags that run `setting` as the build's own --spec-type (OWN_SPEC_TYPES) with the same depth.

    Prompt lookup is `ngram-simple`: it proposes an m-gram (`size-m`, the depth) after an n-token match (`size-n`);
    it drafts only when at least `size-n` tokens follow the match, so the match length never exceeds the depth.
    n_min/p_min have no n-gram counterpart: lookup settings are calibrated with 0 for both. The MTP head is
    `draft-mtp`, which takes the draft model's flags: in the fork's common/speculative.cpp it stops below p_min,
    drops a draft shorter than n_min and never drafts past n_max, as a draft model does.
    """
    spec_type = OWN_SPEC_TYPES[setting.source]
    if spec_type not in spec_types(binary):
        raise ExternalServerError(
            f"{binary} offers no --spec-type {spec_type}: speculative.source {setting.source!r} needs the bundled "
            "runtime or a llama-server build that has it"
        )
    path = resolve_binary(binary)
    dialect = CliDialect.from_help(_help_text(str(path), path.stat().st_mtime_ns))
    n = setting.n_max
    if setting.source == "lookup":
        own = ("--spec-ngram-simple-size-n", str(min(LOOKUP_NGRAM, n)), "--spec-ngram-simple-size-m", str(n))
    else:
        own = (dialect.draft_n_min, str(setting.n_min), dialect.draft_p_min, f"{setting.p_min:g}")
    return ("--spec-type", spec_type, *own, dialect.draft_n_max, str(n))


def mtp_missing(config: EngineConfig, header: GGUFReport | None, offered: Collection[str]) -> str | None:
    """Why the model's own MTP head cannot draft on this server (the bundled runtime's words where the file is
    why), or None when it can. header: the model's GGUF header (None: unreadable); offered: the build's --spec-type
    values (spec_types)."""
    name = Path(config.model).name
    if header is None:
        return f"{name}: its GGUF header could not be read"
    if not header.mtp_layers:
        return f"{name} has no MTP (NextN) layers"
    if MTP_SPEC_TYPE not in offered:
        listed = f" (its --help lists {', '.join(offered)})" if offered else ""
        return f"this llama-server build has no --spec-type {MTP_SPEC_TYPE}{listed}"
    if config.source_mode("mtp") == "off":
        return f"{name} runs without its MTP layers (MTP turned off)"
    return None


def server_default(config: EngineConfig, sources: Collection[str]) -> tuple[SpecSettings, str]:
    """The engine default (EngineConfig.default_with_basis) as a llama-server runs it, and its basis. A server has no
    adaptive length (it drafts to the fixed depth of its flags), so an adaptive default (the MTP head's) runs at
    its depth, n_max, and the basis says so, as it says the cost stop."""
    spec, basis = config.default_with_basis(sources)
    return (spec.with_(adaptive=False), basis + ", fixed depth") if spec.adaptive else (spec, basis)


def server_policy(
    config: EngineConfig,
    sources: Collection[str],
    table: FrontierTable | None,
    fingerprint: Fingerprint | None,
    message: str,
) -> DynamicDraftPolicy:
    """The policy over `table` (None: no table) with the server's default (server_default) and the engine's DD
    options."""
    from app.engine.request_policy import policy_with_default

    return policy_with_default(config, sources, table, fingerprint, message, server_default(config, sources))


def binary_sha256(binary: str) -> str:
    """sha256 of the llama-server executable: its identity (builds from a source tarball all say "version 0")."""
    return cached_sha256(resolve_binary(binary))


def runtime_label(session: ServerRun) -> str:
    """The fingerprint's llama_build for an external server: its /props build_info and its binary's sha256."""
    assert session.config.server_binary is not None
    return f"llama-server {session.features.build_info} sha256:{binary_sha256(session.config.server_binary)}"


def external_fingerprint(session: ServerRun) -> Fingerprint:
    """The calibration fingerprint of a model (and draft) on one llama-server binary; -t is what it starts with."""
    threads = resolve_threads(session.config.n_threads)
    return config_fingerprint(session.config, session.n_ctx, threads, runtime_label(session))


def external_store(session: ServerRun) -> TableStore:
    """The table store of this model pair on this binary: apart from the bundled runtime's (and other binaries'),
    so calibrating one runtime never replaces another's active table."""
    assert session.config.server_binary is not None
    runtime = "llama-server-" + binary_sha256(session.config.server_binary)[:16]
    return calibration_store(session.config.model, session.config.draft, runtime=runtime)


class PerRequestNote(TypedDict):
    """PerRequest.to_dict(): the keys an external llama-server's `dynamic_draft` record adds."""

    applied_per_request: bool
    per_request_note: str


@dataclass(frozen=True)
class PerRequest:
    """Whether DD's choice can reach this server per request, and the sentence a response carries when it cannot."""

    applied: bool
    why: str

    def to_dict(self) -> PerRequestNote:
        return {"applied_per_request": self.applied, "per_request_note": self.why}


def per_request_state(honoured: tuple[str, ...], lifetime: SpecSettings | None, running: SpecSettings) -> PerRequest:
    """What a response says about per-request draft settings on a build honouring `honoured` of SPECULATIVE_FIELDS.

    lifetime: the table's best static setting when a table applies (the server runs it), None without a table.
    """
    if set(SPECULATIVE_FIELDS) <= set(honoured):
        return PerRequest(True, "this llama-server build applies speculative.n_max/n_min/p_min per request")
    lacking = ", ".join(f for f in SPECULATIVE_FIELDS if f not in honoured)
    head = f"this llama-server build ignores {lacking} per request (its /props does not list them), so one draft "
    if lifetime is not None:
        return PerRequest(
            False,
            head + f"setting runs for the server's lifetime: {running.label()}, the calibrated table's best static "
            "setting over its ranges (the server restarts when the table changes)",
        )
    return PerRequest(False, head + f"setting runs for the server's lifetime: {running.label()}, set at its start")


def lifetime_setting(policy: DynamicDraftPolicy, caps: DraftCaps) -> SpecSettings | None:
    """The one setting to run for a server's lifetime when per-request fields are ignored: the table's best static
    setting under the caps (None when no table applies, or none is safe at every calibrated context)."""
    if policy.status != "active":
        return None
    static = policy.static_choice(caps)
    return static.setting if static is not None else None


def load_policy(session: ServerRun) -> tuple[DynamicDraftPolicy, str, SpecSettings | None]:
    """(policy, status line, lifetime setting) from this runtime's active table; never raises for a bad table."""
    store = external_store(session)
    if store.active_id() is None:
        msg = "no calibration table for this model on this llama-server yet: run a calibration"
        return server_policy(session.config, session.sources, None, None, msg), msg, None
    fingerprint = external_fingerprint(session)
    result = store.load_active(fingerprint)
    policy = server_policy(session.config, session.sources, result.table, fingerprint, result.message)
    per_request = set(SPECULATIVE_FIELDS) <= set(session.features.speculative)
    return policy, result.message, None if per_request else lifetime_setting(policy, session.caps)
