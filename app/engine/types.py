"""Typed requests, events and summaries at the engine's boundary (what GUI, HTTP and CLI see)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, TypedDict

from app.engine.reasoning_budget import MAX_MESSAGE_CHARS
from app.policy.dynamic import DecisionDict
from app.runtime import dry
from app.runtime.sampling import SamplingParams, check_bias_entry
from app.speculative.settings import SpecSettings

FinishReason = Literal["stop", "length", "cancelled"]
MAX_TOP_LOGPROBS = 20  # OpenAI's limit for top_logprobs


class EngineError(RuntimeError):
    """A request the engine refused or could not finish; `code` is stable for APIs."""

    code = "engine_error"
    status = 500


class InvalidRequest(EngineError):
    """A request the engine refuses; `param`, when set, names the request field at fault."""

    code = "invalid_request"
    status = 400

    def __init__(self, message: str = "", param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ContextLengthExceeded(InvalidRequest):
    code = "context_length_exceeded"


class InvalidToken(InvalidRequest):
    """A token id outside the model's vocabulary; `param` names where it was ("prompt.3")."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message, param)


MAX_LOGIT_BIAS = 1024
"""At most this many logit_bias entries (OpenAI allows 300): each is a loop step on every sampled row."""


def check_logit_bias(entries: Sequence[tuple[int | str, float]]) -> None:
    """The request-side checks of logit_bias (the vocabulary's bounds are the engine's): InvalidRequest names what
    is wrong."""
    if len(entries) > MAX_LOGIT_BIAS:
        raise InvalidRequest(f"logit_bias: at most {MAX_LOGIT_BIAS} entries, got {len(entries)}", param="logit_bias")
    for key, bias in entries:
        if isinstance(key, str) and not 0 < len(key) <= 256:
            raise InvalidRequest("logit_bias: a text key has 1 to 256 characters", param="logit_bias")
        try:
            check_bias_entry(key, bias)
        except ValueError as e:
            raise InvalidRequest(str(e), param="logit_bias") from None


def check_token_ids(tokens: Sequence[int], n_vocab: int | None, field: str) -> None:
    """Refuse an id outside the vocabulary (only a negative one where its size is unknown) before it reaches
    llama.cpp, which indexes its token tables with ids unchecked: a bad one would abort the process or read garbage."""
    for i, t in enumerate(tokens):
        if t < 0 or (n_vocab is not None and t >= n_vocab):
            limit = f"0..{n_vocab - 1}" if n_vocab is not None else "0 or more"
            raise InvalidToken(f"{field}.{i}: {t} is not a token of this model ({limit})", param=f"{field}.{i}")


class QueueFull(EngineError):
    code = "queue_full"
    status = 429


@dataclass(frozen=True)
class Infill:
    """A fill-in-the-middle prompt (llama-server's /infill fields): the code before and after the cursor, other
    files as repository context (filename, text), and text the middle starts with."""

    prefix: str
    suffix: str
    extra: tuple[tuple[str, str], ...] = ()
    middle: str = ""
    trim: bool = False  # trim all three to fit as llama-server's /infill does (app.engine.infill)


@dataclass(frozen=True)
class GenerationRequest:
    """One generation: chat `messages` (OpenAI-style dicts) through the model's template, a raw `prompt` (text, or
    token ids used as they are, as llama-server and vLLM take them: no BOS added), or an `infill` (fill-in-the-middle,
    framed by the model's FIM tokens as llama-server's /infill frames it)."""

    messages: tuple[dict[str, Any], ...] | None = None
    prompt: str | tuple[int, ...] | None = None
    max_tokens: int = 256
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop: tuple[str, ...] = ()
    speculative: SpecSettings | None = None  # request-level override; None lets Dynamic Draft / defaults decide
    add_generation_prompt: bool = True
    request_id: str = ""
    collect_margins: bool = False  # record the target's top-2 logit margin per token (exactness checks)
    # Reuse the KV cache's common prefix (llama.cpp's cache_prompt). False prefills the whole prompt in one fixed
    # chunking, so the same request gives the same logits whatever ran before it; llama.cpp's logits move slightly
    # with how a prompt was split into batches, which can flip a greedy near-tie.
    cache_prompt: bool = True
    grammar: str | None = None  # GBNF the output must follow (llama.cpp's grammar sampler), also under speculation
    logprobs: int | None = None  # None: off; k >= 0: each token's logprob and the k most likely alternatives
    tools: tuple[dict[str, Any], ...] | None = None  # OpenAI tool definitions, handed to the chat template
    template_kwargs: dict[str, Any] | None = None  # extra chat-template variables (e.g. enable_thinking)
    # A template that opens the reasoning block in the prompt (".. assistant\n<think>\n"): repeat that tag at the
    # start of the output, so a reader of the output text sees the whole <think>..</think> block.
    echo_open_think: bool = False
    # No client limit: generate up to the end of the context window, `max_tokens` then only an upper bound. The
    # engine thread measures the prompt, so admission (429) never waits for the running generation.
    until_context_end: bool = False
    # A chat that outgrows the context window: "error" refuses it (ContextLengthExceeded, as llama-server does);
    # "drop_oldest" leaves out its oldest turns until it fits (app.engine.history.RollingWindow), as LM Studio's
    # rolling window and Ollama do, freeing half the room at a time as Ollama's and llama-server's context shift
    # do. The app's chats use "drop_oldest"; the HTTP API keeps OpenAI's "error".
    context_overflow: Literal["error", "drop_oldest"] = "error"
    infill: Infill | None = None
    # Tokens the reply may spend inside its <think> block before the engine ends it (llama-server's
    # reasoning_budget_tokens; None or -1: no limit, 0: end it as soon as it opens), and the text it then commits
    # before the closing tag (app.engine.reasoning_budget).
    reasoning_budget: int | None = None
    reasoning_budget_message: str = ""
    # llama-server's logit_bias: (token id or text, bias) added to the target's logits (-inf bans; a text biases
    # every token of it). The engine resolves it into sampling.logit_bias against the model's vocabulary.
    logit_bias: tuple[tuple[int | str, float], ...] = ()
    # DRY's sequence breakers as text (llama-server's dry_sequence_breakers); the engine resolves them into
    # sampling.dry_breakers against the model's vocabulary when sampling.dry_multiplier is set.
    dry_sequence_breakers: tuple[str, ...] = dry.DEFAULT_BREAKERS

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.messages, self.prompt, self.infill)) != 1:
            raise InvalidRequest("give exactly one of messages, prompt or infill")
        if self.max_tokens < 1:
            raise InvalidRequest("max_tokens must be >= 1")
        if isinstance(self.prompt, tuple):
            if not self.prompt or not all(type(t) is int for t in self.prompt):
                raise InvalidRequest("prompt: token ids must be a non-empty list of integers")
            check_token_ids(self.prompt, None, "prompt")
        if self.messages is not None:
            if not self.messages:
                raise InvalidRequest("messages must not be empty")
            for m in self.messages:
                if m.get("role") not in ("system", "user", "assistant", "tool"):
                    raise InvalidRequest(f"unknown message role {m.get('role')!r}")
                if not isinstance(m.get("content", ""), str):
                    raise InvalidRequest("message content must be a string")
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_TOP_LOGPROBS:
            raise InvalidRequest(f"logprobs: the number of alternatives must be in [0, {MAX_TOP_LOGPROBS}]")
        if len(self.stop) > 8 or any(not s for s in self.stop):
            raise InvalidRequest("stop: at most 8 non-empty strings")
        if self.reasoning_budget is not None and self.reasoning_budget < -1:
            raise InvalidRequest("reasoning_budget_tokens must be -1 (no limit), 0 or more")
        if len(self.reasoning_budget_message) > MAX_MESSAGE_CHARS:
            raise InvalidRequest(f"reasoning_budget_message: at most {MAX_MESSAGE_CHARS} characters")
        check_logit_bias(self.logit_bias)
        try:
            dry.check_breakers(self.dry_sequence_breakers)
        except ValueError as e:
            raise InvalidRequest(str(e), param="dry_sequence_breakers") from None

    def to_context_end(self) -> GenerationRequest:
        """This request without a token limit: as many tokens as the context window leaves after the prompt."""
        return replace(self, max_tokens=1 << 30, until_context_end=True)


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token as the target scored it: log-softmax of its own logits row (before any sampling knob)."""

    token: int
    piece: bytes  # the token's bytes (a UTF-8 character may span several tokens)
    logprob: float
    top: tuple[tuple[int, bytes, float], ...] = ()  # the most likely tokens of that row: (id, bytes, logprob)


@dataclass(frozen=True)
class TextEvent:
    """A piece of generated text (always whole UTF-8 characters); `drafted` of its tokens came from accepted drafts."""

    text: str
    n_tokens: int
    drafted: int = 0
    logprobs: tuple[TokenLogprob, ...] = ()  # with GenerationRequest.logprobs: the tokens committed since the last


@dataclass(frozen=True)
class StepEvent:
    """One target verify (or one plain decode): what was drafted, what was accepted and what it cost."""

    index: int
    source: str  # "draft", "lookup" or "none"
    depth: int  # draft depth allowed this step
    drafted: int
    accepted: int
    emitted: int  # tokens committed this step (accepted + the target's own)
    draft_ms: float
    verify_ms: float
    t: float  # time.perf_counter() at the end of the step
    n_generated: int


@dataclass(frozen=True)
class Timings:
    """llama.cpp server's timing names, so tools that read llama.cpp read DynaDraft."""

    prompt_n: int = 0
    prompt_ms: float = 0.0
    prompt_per_second: float = 0.0
    predicted_n: int = 0
    predicted_ms: float = 0.0
    predicted_per_second: float = 0.0
    cache_n: int = 0
    draft_n: int = 0
    draft_n_accepted: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ExternalRuntimeNote(TypedDict):
    """What ran on an external llama-server (app.engine.external): its build, the per-request speculative fields it
    honours, those sent and those it would ignore, and the settings that ran (SpecSettings.to_dict())."""

    kind: Literal["llama-server"]
    build: str
    honoured: list[str]
    sent: dict[str, Any]
    ignored: list[str]
    ran: dict[str, Any]


class DynamicDraftRecord(DecisionDict, total=False):
    """`GenerationSummary.dynamic_draft` as it goes on the wire: the policy's decision record (DecisionDict, every
    key always there) plus the keys the engine adds only when they apply."""

    stale_fields: list[str]  # reason "stale_table": the fingerprint fields that differ from the table's (Session)
    stale_message: str  # and how to recalibrate (Session.dd_status)
    speculation_disabled: str  # speculation is off for this model, and why (Session)
    applied_per_request: bool  # external llama-server: whether DD's choice reaches the server per request
    per_request_note: str  # the sentence saying so (app.engine.external_policy.PerRequest)
    runtime: ExternalRuntimeNote  # external llama-server: what ran there
    guard: list[dict[str, Any]]  # the in-request guard's events, where it acted (app.speculative.guard.GuardEvent)


@dataclass(frozen=True)
class GenerationSummary:
    """The end of a generation: text, token ids, why it stopped, timings and speculation statistics."""

    text: str
    tokens: tuple[int, ...]
    finish_reason: FinishReason
    timings: Timings
    steps: int
    prompt_tokens: int
    settings: SpecSettings
    dynamic_draft: DynamicDraftRecord | None = None
    per_source: dict[str, dict[str, Any]] = field(default_factory=dict)
    # with collect_margins: top-1 minus top-2 logit of the row behind each token (and the end token, after a stop)
    margins: tuple[float, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()  # with GenerationRequest.logprobs: one per token in `tokens`
    cache: dict[str, int] | None = None  # the conversation cache's totals after this request (for /metrics)
    content_class: str = ""  # the class the request's statistics and source memory are kept under
    content_subclass: str | None = None  # and its sub-class (copy_edit's near_copy / additive), when it has one
    source_memory: dict[str, Any] | None = None  # the warm start used (app/engine/memory.WarmStart.to_dict)
    dropped_messages: int = 0  # oldest messages left out to fit the context window (context_overflow)
    stopping_word: str = ""  # the stop string that ended it (finish_reason "stop"), "" for an end token or none
    reasoning: dict[str, Any] | None = None  # with a reasoning budget: ReasoningBudget.report()

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tokens": list(self.tokens),
            "finish_reason": self.finish_reason,
            "timings": self.timings.to_dict(),
            "steps": self.steps,
            "prompt_tokens": self.prompt_tokens,
            "speculative": self.settings.to_dict(),
            "dynamic_draft": self.dynamic_draft,
            "per_source": self.per_source,
            "content_class": self.content_class,
            "content_subclass": self.content_subclass,
            "source_memory": self.source_memory,
            "dropped_messages": self.dropped_messages,
            "stopping_word": self.stopping_word,
            "reasoning": self.reasoning,
        }


@dataclass(frozen=True)
class DoneEvent:
    summary: GenerationSummary


Event = TextEvent | StepEvent | DoneEvent
