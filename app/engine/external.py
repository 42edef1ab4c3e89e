"""Generation on an external (fork) llama-server: the engine's Session interface over its HTTP API (no Qt)."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from app.engine.chat import adds_bos
from app.engine.config import EngineConfig
from app.engine.external_policy import (
    LOOKUP_SPEC_TYPE,
    MTP_SPEC_TYPE,
    OWN_SPEC_TYPES,
    external_fingerprint,
    external_store,
    load_policy,
    mtp_missing,
    per_request_state,
    server_default,
    server_policy,
    spec_type_args,
    spec_types,
)
from app.engine.history import RollingWindow, check_prompt_fits
from app.engine.request_policy import choose_settings, request_class
from app.engine.runtime import Capabilities, ModelMeta, SweepAccess
from app.engine.types import (
    ContextLengthExceeded,
    DoneEvent,
    DynamicDraftRecord,
    EngineError,
    Event,
    FinishReason,
    GenerationRequest,
    GenerationSummary,
    InvalidRequest,
    TextEvent,
    Timings,
    check_token_ids,
)
from app.policy.dynamic import DecisionRecord, DraftCaps, DynamicDraftPolicy
from app.runtime.llama_server import (
    SAMPLING_FIELDS,
    SPECULATIVE_FIELDS,
    ExternalServer,
    ExternalServerError,
    ServerFeatures,
    ServerHTTPError,
    ServerSpec,
)
from app.runtime.sampling import SamplingParams
from app.speculative.mtp import MtpSource
from app.speculative.registry import NONE, POOL
from app.speculative.settings import PLAIN, SpecSettings
from app.speculative.sources import DraftModelSource, PromptLookupSource

if TYPE_CHECKING:
    from app.models.inspection import GGUFReport

# llama-server's stop_type → the engine's finish reasons ("word": a stop string matched).
_FINISH: dict[str, FinishReason] = {"eos": "stop", "word": "stop", "limit": "length"}
_TIMING_FIELDS = tuple(Timings.__dataclass_fields__)
NO_TABLE_MESSAGE = "no calibration table for this model on this llama-server yet: the configured default runs"


def start_settings(config: EngineConfig, caps: DraftCaps, sources: Sequence[str]) -> SpecSettings:
    """The draft flags the server starts with for its default (server_default) over the draft `sources` it offers:
    a draft model with the draft allocation (caps.n_max, as the bundled engine allocates) and the default's
    n_min/p_min; the build's own drafting (OWN_SPEC_TYPES: the MTP head) as the default itself, since one MTP head
    applied recursively drifts after a few tokens and a build that ignores per-request fields runs these flags for
    every request."""
    default = caps.clamp(server_default(config, sources)[0])
    if default.is_plain or default.source in OWN_SPEC_TYPES:
        return default
    return default.with_(n_max=caps.n_max, n_min=min(default.n_min, caps.n_max))


def server_spec(config: EngineConfig, start: SpecSettings) -> ServerSpec:
    assert config.server_binary is not None
    # The build's own drafting (n-gram lookup, the MTP head): no draft model, its own --spec-type flags.
    own = start.source in OWN_SPEC_TYPES and not start.is_plain
    return ServerSpec(
        binary=config.server_binary,
        model=config.model,
        # A draft the server would never use is not loaded.
        draft=None if start.is_plain or own else config.draft,
        n_ctx=config.n_ctx,
        n_batch=config.n_batch,
        n_threads=config.n_threads,
        n_gpu_layers=config.n_gpu_layers,
        draft_n_gpu_layers=config.draft_n_gpu_layers,
        flash_attn=config.flash_attn,
        type_k=config.type_k,
        type_v=config.type_v,
        draft_n_max=start.n_max,
        draft_n_min=start.n_min,
        draft_p_min=start.p_min,
        extra_args=spec_type_args(config.server_binary, start) if own else (),
        chat_template=config.chat_template,
    )


class ServerTokenizer:
    """The Tokenizer of a model served by a llama-server: its /tokenize and /detokenize, one HTTP request each (a
    connection per request, so any thread may call). Special tokens are always rendered as text, as llama-server's
    /detokenize does. Pieces come whole from /tokenize's `with_pieces`, bytes and all: its /detokenize of one token
    would replace the half of a split UTF-8 character with U+FFFD."""

    def __init__(self, session: ExternalSession) -> None:
        self.session = session

    def tokenize(self, text: str, add_special: bool, parse_special: bool = True) -> list[int]:
        return self.session._tokenize(text, add_special, parse_special)

    def pieces(self, text: str, add_special: bool, parse_special: bool = True) -> list[tuple[int, bytes]]:
        body = {"content": text, "add_special": add_special, "parse_special": parse_special, "with_pieces": True}
        return [
            (int(item["id"]), bytes(p) if isinstance(p := item["piece"], list) else str(p).encode("utf-8"))
            for item in self.session._call("POST", "/tokenize", body)["tokens"]
        ]

    def detokenize(self, tokens: Sequence[int], special: bool = False) -> str:
        if any(t < 0 for t in tokens):
            raise ValueError("a token id is negative: not in the vocabulary")
        return str(self.session._call("POST", "/detokenize", {"tokens": list(tokens)})["content"])


def _gguf_header(path: str) -> GGUFReport | None:
    """What the model file's header says (size, parameters, vocabulary), or None where it cannot be read."""
    from app.models.gguf_reader import GGUFError
    from app.models.inspection import inspect_gguf

    try:
        return inspect_gguf(path)
    except (GGUFError, OSError):
        return None


def offered_sources(
    config: EngineConfig, header: GGUFReport | None, offered: Sequence[str]
) -> tuple[tuple[str, ...], dict[str, str]]:
    """(the draft sources a server offers, in registry order; why the MTP head is not among them where it is not):
    the draft model where one is configured, prompt lookup where the build has n-gram drafting, the model's own MTP
    head where the file has one and the build has draft-mtp. offered: the build's --spec-type values."""
    why = mtp_missing(config, header, offered)
    sources = (
        *((DraftModelSource.name,) if config.draft is not None else ()),
        *((PromptLookupSource.name,) if LOOKUP_SPEC_TYPE in offered else ()),
        *((MtpSource.name,) if why is None else ()),
    )
    return sources, {MtpSource.name: why} if why is not None else {}


def speculative_fields(
    settings: SpecSettings, start: SpecSettings, features: ServerFeatures
) -> tuple[dict[str, Any], tuple[str, ...], SpecSettings]:
    """Request fields for DD's chosen settings: (sent, ignored field names, the settings that actually run).

    Only fields the build honours are sent; when it honours none, its start-time flags run whatever DD chose.
    """
    wanted: dict[str, Any] = {
        "speculative.n_max": 0 if settings.is_plain else settings.n_max,
        "speculative.n_min": 0 if settings.is_plain else settings.n_min,
        "speculative.p_min": settings.p_min,
    }
    # A source other than the running one (lookup on a draft-model server) cannot be switched per request.
    same_source = settings.is_plain or start.is_plain or settings.source == start.source
    sent = {k: v for k, v in wanted.items() if k in features.speculative and same_source}
    ignored = tuple(k for k in wanted if k not in sent)
    if not sent:
        return sent, ignored, start
    ran = start.with_(
        n_max=min(sent.get("speculative.n_max", start.n_max), start.n_max),
        n_min=min(sent.get("speculative.n_min", start.n_min), start.n_max),
        p_min=sent.get("speculative.p_min", start.p_min),
    )
    return sent, ignored, PLAIN if ran.n_max == 0 else ran


def top2_margin(prob: dict[str, Any]) -> float:
    """Top-1 minus top-2 log-probability of one generated position (llama-server's `n_probs` output); inf if the
    server gave fewer than two."""
    top = [float(t["logprob"]) for t in prob.get("top_logprobs") or () if "logprob" in t]
    return top[0] - top[1] if len(top) >= 2 else float("inf")


def engine_error(e: ServerHTTPError) -> EngineError:
    """The engine's error for a llama-server error answer, keeping the server's own message."""
    if e.error_type == "exceed_context_size_error":
        return ContextLengthExceeded(f"llama-server: {e.server_message}")
    if e.status == 400 or e.error_type == "invalid_request_error":
        return InvalidRequest(f"llama-server: {e.server_message}")
    return EngineError(f"llama-server: {e.server_message or e}")


# The server's own budget acts on its chat route, where it knows the template's thinking tags; this runtime sends
# it token prompts (/completion), where it would not apply.
NO_BUDGET = "--reasoning-budget: a reasoning budget needs the bundled runtime"


class ExternalSession:
    """One model (and draft) on a managed llama-server. Not thread-safe: one engine thread drives it, like Session.

    Prompts are templated and tokenized by the server (/apply-template, /tokenize), so Dynamic Draft decides on
    the exact token count the server will process, and /completion gets those token ids. No StepEvents: the
    server does not report its verify steps one by one.
    """

    def __init__(self, config: EngineConfig, server: ExternalServer | None = None) -> None:
        if config.server_binary is None and server is None:
            raise EngineError("ExternalSession needs EngineConfig.server_binary (the llama-server to run)")
        if config.reasoning_budget >= 0:
            raise EngineError(NO_BUDGET)
        self.config = config
        binary = server.spec.binary if server is not None else config.server_binary
        assert binary is not None
        # Read before the start: whether the file has an MTP head decides the start flags (model_meta and the
        # token-id check use it too).
        self._header = _gguf_header(config.model)
        self._sources, self._missing = offered_sources(config, self._header, spec_types(binary))
        if config.source_mode(MtpSource.name) == "on" and MtpSource.name in self._missing:
            raise EngineError(f"--mtp: {self._missing[MtpSource.name]}")  # as the bundled runtime refuses it
        depth = min(config.draft_n_max_cap, config.n_batch - 1, 64)
        self._caps = DraftCaps(depth, config.draft is not None, frozenset(self._missing))
        self.base_settings = start_settings(config, self._caps, self._sources)  # the start when no table applies
        self.start_settings = self.base_settings  # what the running server was started with
        self.lifetime: SpecSettings | None = None  # the table's one setting, when per-request fields are ignored
        self.server = server or ExternalServer(server_spec(config, self.start_settings))
        try:
            self.server.start()
        except ExternalServerError as e:
            raise EngineError(str(e)) from e
        assert self.server.features is not None
        self.features: ServerFeatures = self.server.features
        self.policy = server_policy(config, self._sources, None, None, NO_TABLE_MESSAGE)
        self.dd_status = NO_TABLE_MESSAGE
        self.window = RollingWindow()  # where long chats are cut, so the server's slot reuses the cached window
        # What the server's slot holds after the last request (its prompt and every streamed token but the last, which
        # is sampled, not decoded); see _cache_prompt.
        self._slot_tokens: list[int] | None = None
        try:
            # The special prefix tokenization adds to empty text tells whether this model adds a BOS.
            self._add_bos = bool(self._tokenize("", add_special=True, parse_special=False))
            self.reload_policy()
        except BaseException:
            self.server.stop()
            raise

    # -- the Runtime interface ------------------------------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(sources=self._sources, pool=False, adaptive=False)

    def status(self) -> str:
        """Its build and which per-request fields it honours."""
        return self.features.describe()

    @property
    def caps(self) -> DraftCaps:
        return self._caps

    @property
    def sources(self) -> tuple[str, ...]:
        """The draft sources this server offers (capabilities.sources)."""
        return self._sources

    @property
    def n_ctx(self) -> int:
        return self.features.n_ctx or self.config.n_ctx

    def model_meta(self) -> ModelMeta:
        """Its context window and chat template as the server reports them (a llama-server caps the window and logs
        why itself; a --chat-template-file it was given is the template its /props names); the rest from the GGUF's
        header, as llama-server's /v1/models reports it (None where the header cannot be read)."""
        f, report = self.features, self._header
        return ModelMeta(
            self.n_ctx,
            n_ctx_train=report.context_length if report else None,
            n_params=report.parameter_count if report else None,
            size=report.file_size if report else None,
            n_vocab=report.tokenizer.vocab_size if report else None,
            build=f.build_info,
            chat_template=f.chat_template,
            bos_token=f.bos_token,
            eos_token=f.eos_token,
        )

    def tokenizer(self) -> ServerTokenizer:
        return ServerTokenizer(self)

    def set_policy(self, policy: DynamicDraftPolicy) -> None:
        self.policy = policy

    def sweep_access(self) -> SweepAccess:
        """Calibrated through the server, its tables kept per binary; settings that are start flags restart it."""
        return SweepAccess(external_fingerprint(self), external_store(self), starts=self)

    def lists_per_request_fields(self) -> bool:
        """Its /props names every per-request draft field (ServerStarts)."""
        return set(SPECULATIVE_FIELDS) <= set(self.features.speculative)

    def reload_policy(self) -> str:
        """Load this runtime's active table (its fingerprint names this binary). A build that ignores per-request
        draft fields is restarted with the table's best static setting (or back to the default without a table)."""
        self.policy, self.dd_status, self.lifetime = load_policy(self)
        wanted = self.lifetime or self.base_settings
        if wanted != self.start_settings:
            self.restart(wanted)
        return self.dd_status

    def restart(self, settings: SpecSettings) -> None:
        """Stop the server and start it again with `settings` as its start-time draft flags."""
        self.server.stop()
        self.server = ExternalServer(server_spec(self.config, settings))
        try:
            self.server.start()
        except ExternalServerError as e:
            raise EngineError(str(e)) from e
        assert self.server.features is not None
        self.start_settings, self.features = settings, self.server.features

    def format_prompt(self, request: GenerationRequest) -> list[int]:
        """The server's chat template (for messages) and tokenizer: exactly the tokens the model will see."""
        return self.templated(request)[0]

    def render_prompt(self, request: GenerationRequest) -> str:
        """The server's chat template applied to the request's messages: its /apply-template (any thread may call)."""
        assert request.messages is not None
        body = {"messages": list(request.messages), "add_generation_prompt": request.add_generation_prompt}
        return str(self._call("POST", "/apply-template", body)["prompt"])

    def templated(self, request: GenerationRequest) -> tuple[list[int], str]:
        """format_prompt's tokens and the text they came from (the server's templated prompt, or the raw prompt)."""
        if request.messages is not None:
            text = self.render_prompt(request)
            add_special = adds_bos(text, self._add_bos, self.features.bos_token)
            return self._tokenize(text, add_special=add_special, parse_special=True), text
        if isinstance(request.prompt, tuple):
            n_vocab = self._header.tokenizer.vocab_size if self._header else None
            check_token_ids(request.prompt, n_vocab, "prompt")  # refused as the bundled runtime refuses it
            return list(request.prompt), self.tokenizer().detokenize(request.prompt, special=True)
        assert request.prompt is not None
        add_special = adds_bos(request.prompt, self._add_bos, self.features.bos_token)  # as Session's
        return self._tokenize(request.prompt, add_special=add_special, parse_special=True), request.prompt

    def close(self) -> None:
        self.server.stop()

    def generate(self, request: GenerationRequest, cancel: threading.Event | None = None) -> Iterator[Event]:
        """Run one request on the server; yields TextEvents and ends with a DoneEvent. Raises EngineError subclasses."""
        spec = request.speculative
        self._refuse_what_it_cannot_run(request)
        self._check_sampling(request)
        request, prompt, prompt_text, dropped = self.window.fit(request, self.templated, self.n_ctx)
        n_prompt = len(prompt)
        max_tokens = check_prompt_fits(n_prompt, request.max_tokens, self.n_ctx, request.until_context_end)
        request = replace(request, max_tokens=max_tokens, until_context_end=False)
        klass = request_class(request, prompt_text)
        # Decided (and a source the server lacks refused, with why) before any restart for the request's source.
        settings, record = choose_settings(
            self.policy, self.caps, n_prompt, spec, self.capabilities.sources, self._missing, klass
        )
        if spec is not None and not spec.is_plain and spec.source != self.start_settings.source:
            self._switch_source(spec)
        sent, ignored, ran = speculative_fields(settings, self.start_settings, self.features)
        body = self._completion_body(request, prompt) | sent
        if request.collect_margins:
            body["n_probs"] = 2  # log-probabilities of the top 2 differ exactly as their logits do
        margins: list[float] = []

        text: list[str] = []
        tokens: list[int] = []
        final: dict[str, Any] | None = None
        cancelled = False
        t0 = time.perf_counter()
        self._slot_tokens = None  # unknown until the answer is read
        with self._server_errors():
            stream = self.server.stream("/completion", body)
        with stream, self._server_errors(ValueError):  # ValueError: a chunk that is not JSON
            for chunk in stream:
                if chunk.get("content"):
                    text.append(chunk["content"])
                    yield TextEvent(chunk["content"], len(chunk.get("tokens") or ()), 0)
                tokens.extend(int(t) for t in chunk.get("tokens") or ())
                margins.extend(top2_margin(p) for p in chunk.get("completion_probabilities") or ())
                if chunk.get("stop"):
                    final = chunk
                    break
                if cancel is not None and cancel.is_set():
                    cancelled = True  # closing the connection (leaving `with`) makes the server drop the slot
                    break
        self._slot_tokens = [*prompt, *tokens[:-1]] if tokens else None
        if final is None and not cancelled:
            raise self._unreachable(EOFError("the stream ended before its final event"))
        if final is not None and final.get("stop_type") == "eos" and tokens:
            tokens.pop()  # the end-of-generation token the server streams last is not output, as in Session
            del margins[len(tokens) :]
        wall_ms = (time.perf_counter() - t0) * 1000.0
        timings = self._timings(final, n_prompt, len(tokens), wall_ms)
        dd = self._decision(record, settings, sent, ignored, ran)
        finish: FinishReason = "cancelled" if cancelled else _FINISH.get(str((final or {}).get("stop_type")), "stop")
        yield DoneEvent(
            GenerationSummary(
                text="".join(text),
                tokens=tuple(tokens),
                finish_reason=finish,
                timings=timings,
                # Every target verify commits the accepted drafts plus one token of its own.
                steps=max(0, timings.predicted_n - timings.draft_n_accepted),
                prompt_tokens=n_prompt,
                settings=ran,
                dynamic_draft=dd,
                margins=tuple(margins),
                dropped_messages=dropped,
                stopping_word=str((final or {}).get("stopping_word") or ""),
            )
        )

    # -- helpers --------------------------------------------------------------------------------------------------
    def _cache_prompt(self, request: GenerationRequest, prompt: list[int]) -> bool:
        """Whether the server may reuse its cached prompt. Not when the slot holds exactly this prompt (the last
        answer was one token, or was stopped after one): the server then re-decodes the prompt's last token, and the
        ROCmFPx fork (c14872f) aborts in common_context_seq_rm on a hybrid model such as Qwen3.5/3.6, where upstream
        llama-server answers (both seen here on a tiny Qwen3.5, tests/engine/test_external_mtp.py). A full prefill of
        a rare exact repeat is the price."""
        return request.cache_prompt and prompt != self._slot_tokens

    def _refuse_what_it_cannot_run(self, request: GenerationRequest) -> None:
        """A request for what only the bundled runtime does is refused with the reason (never silently ignored)."""
        spec = request.speculative
        can = self.capabilities
        if spec is not None and (
            spec.source not in (NONE, POOL, *can.sources, *self._missing)  # a missing one: choose_settings says why
            or (spec.source == POOL and not can.pool)
            or (spec.adaptive and not can.adaptive)
        ):
            what = "adaptive length" if spec.adaptive else f"speculative.source {spec.source!r}"
            raise InvalidRequest(
                "an external llama-server drafts at a fixed depth with its draft model (-md) or, where the build "
                f"has them, its {LOOKUP_SPEC_TYPE} lookup and the model's MTP head ({MTP_SPEC_TYPE}): {what} needs "
                "the bundled runtime"
            )
        if spec is not None and spec.cost_stop and not spec.is_plain:
            raise InvalidRequest(
                "speculative.cost_stop: the cost stop needs the bundled runtime (an external llama-server stops drafts "
                "only by its fixed p_min)"
            )
        wanted = {"logprobs": request.logprobs is not None, "tools": bool(request.tools)}
        wanted["chat_template_kwargs"] = bool(request.template_kwargs)
        wanted["infill"] = request.infill is not None  # fill-in-the-middle: the server's /infill, not used here
        wanted["reasoning_budget_tokens"] = request.reasoning_budget is not None and request.reasoning_budget >= 0
        if any(wanted.values()):
            names = ", ".join(k for k, v in wanted.items() if v)
            raise InvalidRequest(f"{names}: not available on an external llama-server runtime (use the bundled one)")

    def _decision(
        self,
        record: DecisionRecord,
        settings: SpecSettings,
        sent: dict[str, Any],
        ignored: Sequence[str],
        ran: SpecSettings,
    ) -> DynamicDraftRecord:
        """The decision record, with what this server was sent, ignored and ran (DD's choice applied only if it ran)."""
        state = per_request_state(self.features.speculative, self.lifetime, self.start_settings)
        dd: DynamicDraftRecord = {**record.to_dict(), **state.to_dict()}
        dd["applied"] = record.applied and ran == settings  # DD's choice is what ran
        dd["runtime"] = {
            "kind": "llama-server",
            "build": self.features.build_info,
            "honoured": list(self.features.speculative),
            "sent": sent,
            "ignored": list(ignored),
            "ran": ran.to_dict(),
        }
        return dd

    def _switch_source(self, spec: SpecSettings) -> None:
        """A request for another draft source than the running server's: restart it with that source (the draft
        type is a start-time flag in every build). Lookup and the MTP head run as the request asks; a draft model
        as configured."""
        if spec.source == PromptLookupSource.name:  # offered: generate() refused it otherwise
            self.restart(self.caps.clamp(spec.with_(n_min=0, p_min=0.0)))  # n-gram drafts have no n_min/p_min
        elif spec.source == MtpSource.name:
            self.restart(self.caps.clamp(spec))
        elif spec.source == "draft" and self.base_settings.source == "draft":
            self.restart(self.base_settings)  # a server started plain (a plain default) has no draft to switch to

    def _check_sampling(self, request: GenerationRequest) -> None:
        """Refuse a sampling knob this build would drop (absent from its /props), and token ids outside its
        vocabulary in logit_bias (llama-server skips those without a word), as the bundled runtime refuses them."""
        default = SamplingParams()
        dropped = [
            f
            for f in SAMPLING_FIELDS
            if f != "seed" and f not in self.features.honoured and getattr(request.sampling, f) != getattr(default, f)
        ]
        if dropped:
            build = self.features.build_info
            raise InvalidRequest(f"{', '.join(dropped)}: not available on this llama-server build ({build})")
        n_vocab = self._header.tokenizer.vocab_size if self._header else None
        ids = tuple(k for k, _ in (*request.logit_bias, *request.sampling.logit_bias) if isinstance(k, int))
        if ids and n_vocab:
            check_token_ids(ids, n_vocab, "logit_bias")

    def _completion_body(self, request: GenerationRequest, prompt: list[int]) -> dict[str, Any]:
        fields = {f: getattr(request.sampling, f) for f in SAMPLING_FIELDS}
        sampling = {k: v for k, v in fields.items() if k in self.features.honoured}
        if sampling.get("seed") is None:
            sampling.pop("seed", None)  # the server draws its own
        if request.sampling.greedy and "temperature" in sampling:
            sampling["temperature"] = 0.0  # a tiny temperature means greedy here too, whatever the server makes of it
        return {
            "prompt": prompt,
            "n_predict": request.max_tokens,
            "stream": True,
            "return_tokens": True,
            "cache_prompt": self._cache_prompt(request, prompt),
            "stop": list(request.stop),
            **sampling,
            **({"grammar": request.grammar} if request.grammar is not None else {}),
            **self._sampler_lists(request),
        }

    @staticmethod
    def _sampler_lists(request: GenerationRequest) -> dict[str, Any]:
        """logit_bias in llama-server's list form (false bans: JSON has no -inf) and DRY's breakers, where set."""
        out: dict[str, Any] = {}
        bias = (*request.logit_bias, *request.sampling.logit_bias)
        if bias:
            out["logit_bias"] = [[key, False if b == float("-inf") else b] for key, b in bias]
        if request.sampling.dry_on:
            out["dry_sequence_breakers"] = list(request.dry_sequence_breakers)
        return out

    def _timings(self, final: dict[str, Any] | None, n_prompt: int, n_tokens: int, wall_ms: float) -> Timings:
        raw = (final or {}).get("timings") or {}
        if not raw:  # cancelled: the server sends no final timings, so report what was seen
            return Timings(prompt_n=n_prompt, predicted_n=n_tokens, predicted_ms=round(wall_ms, 3))
        values = {k: raw[k] for k in _TIMING_FIELDS if k in raw}
        return Timings(**values)

    def _tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        body = {"content": text, "add_special": add_special, "parse_special": parse_special}
        return [int(t) for t in self._call("POST", "/tokenize", body)["tokens"]]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        with self._server_errors():
            return self.server.request(method, path, body)[1]

    @contextmanager
    def _server_errors(self, *also: type[Exception]) -> Iterator[None]:
        """The engine's errors for the server's: its error answers keep their message; a dead or unreachable
        server says so (with the end of its log). `also`: further exception types that mean a broken exchange."""
        broken: tuple[type[Exception], ...] = (OSError, http.client.HTTPException, *also)
        try:
            yield
        except ServerHTTPError as e:
            raise engine_error(e) from e
        except broken as e:
            raise self._unreachable(e) from e

    def _unreachable(self, e: BaseException) -> EngineError:
        if not self.server.running:
            code = self.server.proc.returncode if self.server.proc is not None else None
            return EngineError(
                f"llama-server is not running (exit code {code}); its log ends with:\n{self.server.logs(15)}"
            )
        return EngineError(f"llama-server connection failed: {type(e).__name__}: {e}")
