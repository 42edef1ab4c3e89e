"""Dynamic Draft on an external llama-server: its identity, its own tables, lookup flags, the lifetime setting."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
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
    from app.policy.store import TableStore

# DynaDraft's prompt lookup is llama.cpp's n-gram drafting without a draft model. `ngram-simple` is the same idea
# (find the latest earlier occurrence of the last n tokens, propose what followed, up to m tokens); `ngram-mod` is
# a hashed n-gram model of everything seen (24-token matches by default), a different source, so it is not used.
LOOKUP_SPEC_TYPE = "ngram-simple"
LOOKUP_NGRAM = 4  # the longest n-gram DynaDraft's own lookup tries (PromptLookupSource's default)
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


def lookup_args(binary: str, setting: SpecSettings) -> tuple[str, ...]:
    """Server flags that make prompt lookup (source "lookup") the build's n-gram drafting with the same depth.

    ngram-simple proposes an m-gram (`size-m`, the depth) after an n-token match (`size-n`); it drafts only when
    at least `size-n` tokens follow the match, so the match length never exceeds the depth. n_min/p_min have no
    n-gram counterpart: lookup settings are calibrated with 0 for both.
    """
    if LOOKUP_SPEC_TYPE not in spec_types(binary):
        raise ExternalServerError(
            f"{binary} offers no --spec-type {LOOKUP_SPEC_TYPE}: prompt lookup needs the bundled runtime or a "
            "llama-server build that has it"
        )
    path = resolve_binary(binary)
    dialect = CliDialect.from_help(_help_text(str(path), path.stat().st_mtime_ns))
    n = setting.n_max
    return (
        "--spec-type", LOOKUP_SPEC_TYPE,
        "--spec-ngram-simple-size-n", str(min(LOOKUP_NGRAM, n)),
        "--spec-ngram-simple-size-m", str(n),
        dialect.draft_n_max, str(n),
    )  # fmt: skip


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
    from app.engine.request_policy import policy_with_default, policy_without_table

    store = external_store(session)
    if store.active_id() is None:
        msg = "no calibration table for this model on this llama-server yet: run a calibration"
        return policy_without_table(session.config, msg, session.sources), msg, None
    fingerprint = external_fingerprint(session)
    result = store.load_active(fingerprint)
    policy = policy_with_default(session.config, session.sources, result.table, fingerprint, result.message)
    per_request = set(SPECULATIVE_FIELDS) <= set(session.features.speculative)
    return policy, result.message, None if per_request else lifetime_setting(policy, session.caps)
