"""The interface every runtime behind the engine thread implements (the bundled Session, an external llama-server)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app.engine.types import Event, GenerationRequest
from app.policy.dynamic import DraftCaps, DynamicDraftPolicy
from app.policy.fingerprint import Fingerprint
from app.policy.store import TableStore
from app.speculative.settings import SpecSettings

if TYPE_CHECKING:
    from app.engine.config import EngineConfig


@dataclass(frozen=True)
class Capabilities:
    """What a runtime can do, so callers ask it instead of checking its class.

    sources: the draft sources (registry names) it has loaded, which a request may name besides "none" and "pool";
    pool: per-step source choice ("pool"); adaptive: adaptive draft length.
    """

    sources: tuple[str, ...]
    pool: bool
    adaptive: bool


@dataclass(frozen=True)
class ModelMeta:
    """What a runtime knows of its loaded model, as llama-server's /props and /v1/models report it (None: unknown).

    n_ctx: the context window a request may fill; notes: where that window is not what was asked, and why.
    """

    n_ctx: int
    n_ctx_train: int | None = None
    n_params: int | None = None
    size: int | None = None  # bytes of weights
    n_vocab: int | None = None
    notes: tuple[str, ...] = ()
    build: str = ""  # the runtime's build ("llama-cpp-python 0.3.36", a llama-server's build_info)
    chat_template: str = ""  # the template applied ("" when none: raw prompts only)
    bos_token: str = ""
    eos_token: str = ""

    def to_json(self) -> dict[str, int | None]:
        """llama-server's `meta` object of a /v1/models entry (the fields DynaDraft knows)."""
        return {
            "n_ctx": self.n_ctx,
            "n_ctx_train": self.n_ctx_train,
            "n_params": self.n_params,
            "size": self.size,
            "n_vocab": self.n_vocab,
        }


class Tokenizer(Protocol):
    """A loaded model's tokenizer, callable from any thread: it reads the vocabulary, never a context, so counting a
    prompt's tokens does not queue behind a generation (llama-server answers /tokenize on its HTTP threads too).

    `pieces(...)`: tokenize's ids, each with its bytes (part of a UTF-8 character, possibly; control tokens as their
    text, as llama-server's `with_pieces`); `detokenize(tokens, special)`: the tokens' text, a character split across
    tokens joined again; `special` renders control tokens as their text. A token outside the vocabulary raises
    ValueError.
    """

    def tokenize(self, text: str, add_special: bool, parse_special: bool = True) -> list[int]: ...

    def pieces(self, text: str, add_special: bool, parse_special: bool = True) -> list[tuple[int, bytes]]: ...

    def detokenize(self, tokens: Sequence[int], special: bool = False) -> str: ...


class ServerStarts(Protocol):
    """A runtime whose draft settings are partly start-time flags (an external llama-server): the calibration sweep
    restarts it for a setting a running build cannot take per request.

    `start_settings`: what the running server was started with; `base_settings`: what it starts with when no table
    applies; `lists_per_request_fields()`: its /props names the per-request draft fields (whether the build really
    applies them is for a probe to show)."""

    start_settings: SpecSettings
    base_settings: SpecSettings

    def lists_per_request_fields(self) -> bool: ...

    def restart(self, settings: SpecSettings) -> None: ...


@dataclass(frozen=True)
class SweepAccess:
    """What a calibration sweep needs of a runtime besides generating: the fingerprint its table is saved under, the
    store it goes to, and how the runtime takes settings.

    starts: None where every setting goes per request (the bundled runtime), else the server's start-time flags;
    warm_up(rows): decode every verify batch size once (a GPU builds a shape's kernels on first use), where the
    runtime can; learns: the pool and adaptive length start each request from the source memory (timed warm)."""

    fingerprint: Fingerprint
    store: TableStore
    starts: ServerStarts | None = None
    warm_up: Callable[[int], None] | None = None
    learns: bool = False


class Runtime(Protocol):
    """One loaded model (and draft) that one engine thread drives; not thread-safe.

    `generate` yields TextEvent/StepEvent and ends with a DoneEvent, raising EngineError subclasses for refused or
    failed requests; `format_prompt` gives exactly the tokens the model will see; `caps` is the draft allocation;
    `policy` is Dynamic Draft for this runtime and `reload_policy()` re-reads its table (returns a status line, also
    kept in `dd_status`); `status()` is one line saying which runtime this is and what it honours; `model_meta()`
    what it knows of the model (its context window above all); `tokenizer()` the model's tokenizer, for any thread;
    `render_prompt` a chat request's messages through the model's template, and `templated` format_prompt's tokens
    with their text, also for any thread (they read the template and vocabulary, never a context); `sweep_access()`
    what calibration needs of it.
    """

    config: EngineConfig
    policy: DynamicDraftPolicy
    dd_status: str

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def caps(self) -> DraftCaps: ...

    @property
    def n_ctx(self) -> int: ...

    def format_prompt(self, request: GenerationRequest) -> list[int]: ...

    def templated(self, request: GenerationRequest) -> tuple[list[int], str]: ...

    def render_prompt(self, request: GenerationRequest) -> str: ...

    def generate(self, request: GenerationRequest, cancel: threading.Event | None = None) -> Iterator[Event]: ...

    def set_policy(self, policy: DynamicDraftPolicy) -> None: ...

    def reload_policy(self) -> str: ...

    def status(self) -> str: ...

    def model_meta(self) -> ModelMeta: ...

    def tokenizer(self) -> Tokenizer: ...

    def sweep_access(self) -> SweepAccess: ...

    def close(self) -> None: ...
