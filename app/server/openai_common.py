"""What the OpenAI chat and completions dialects share: sampling, speculation, stop, limits, usage, SSE."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel

from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary, InvalidRequest, TokenLogprob
from app.runtime.dry import DEFAULT_BREAKERS
from app.runtime.llama_server import SAMPLING_FIELDS
from app.runtime.sampling import SamplingParams
from app.server.errors import ApiError
from app.server.schemas import (
    ChatCompletionRequest,
    CompletionRequest,
    CompletionTokensDetails,
    PromptTokensDetails,
    SpeculativeOptions,
    Usage,
)
from app.speculative import registry
from app.speculative.settings import SpecSettings

# OpenAI's default when a request leaves temperature out (llama.cpp uses 0.8); clients that want greedy send 0.
DEFAULT_TEMPERATURE = 1.0


def unsupported(param: str, message: str) -> ApiError:
    return ApiError(400, message, code="unsupported_feature", param=param)


# -- requests ------------------------------------------------------------------------------------------------------
NO_LIMIT = -1
"""max_tokens -1: no limit (until the reply ends or the window is full), as llama-server and LM Studio read it."""


def requested_max_tokens(req: ChatCompletionRequest | CompletionRequest) -> int | None:
    """The client's token limit (`max_completion_tokens` wins over the legacy `max_tokens`), or None if unset or
    NO_LIMIT."""
    limit = req.max_tokens
    if isinstance(req, ChatCompletionRequest) and req.max_completion_tokens is not None:
        limit = req.max_completion_tokens
    return None if limit == NO_LIMIT else limit


def _check_max_tokens(req: ChatCompletionRequest | CompletionRequest) -> None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = getattr(req, name, None)
        if value is not None and value < 1 and value != NO_LIMIT:
            msg = f"{name} must be >= 1, or -1 for no limit; got {value}"
            raise ApiError(400, msg, code="invalid_request", param=name)


def _sampling(req: ChatCompletionRequest | CompletionRequest) -> SamplingParams:
    seed = req.seed
    if seed is not None and seed < 0:
        if seed != -1:
            raise ApiError(
                400, f"seed must be >= 0 (or -1 for random), got {seed}", code="invalid_request", param="seed"
            )
        seed = None  # llama.cpp's convention: -1 means a random seed
    # Every sampling field under llama-server's name, as the request's schema and SamplingParams both spell it.
    values: dict[str, Any] = {f: getattr(req, f) for f in SAMPLING_FIELDS}
    values["seed"] = seed
    if req.temperature is None:
        values["temperature"] = DEFAULT_TEMPERATURE
    if req.dry_base is not None and req.dry_base < 1.0:
        values["dry_base"] = None  # llama-server's rule: a base below 1 means its default (clients send 0, DRY off)
    try:
        return SamplingParams(**{k: v for k, v in values.items() if v is not None or k == "seed"})
    except ValueError as e:
        # SamplingParams' messages start with the offending field name ("top_p must be in (0, 1]").
        match = re.match(r"[a-z_]+", str(e))
        raise ApiError(400, str(e), code="invalid_request", param=match.group(0) if match else None) from None


def _speculative(opts: SpeculativeOptions | None, sources: Collection[str]) -> SpecSettings | None:
    """The request's SpecSettings override; unspecified fields take the shared defaults (registry.from_intent)."""
    if opts is None:
        return None
    data = opts.model_dump(exclude_none=True)
    if not data:
        return None  # an empty object asks for nothing: let Dynamic Draft / the engine defaults decide
    source = data.pop("source", None) or registry.default_source(sources)
    if registry.needs_draft_model(source) and "draft" not in sources:
        raise ApiError(
            400,
            f"speculative.source {source!r} needs a draft model and none is loaded; use 'lookup' or 'none'",
            code="invalid_request",
            param="speculative.source",
        )
    try:
        return registry.from_intent(source, loaded=sources, **data)
    except ValueError as e:
        match = re.match(r"(speculative\.[a-z_]+)", str(e))
        raise ApiError(400, str(e), code="invalid_request", param=match.group(1) if match else "speculative") from None


def _logit_bias(raw: dict[str, float | bool] | list[tuple[int | str, float | bool]] | None) -> tuple[Any, ...]:
    """The request's logit_bias as (token id or text, bias) pairs: OpenAI's keys are token ids written as text; any
    other text key biases that text's tokens, and false bans (-inf), as llama-server reads it."""
    if not raw:
        return ()
    pairs = []
    for key, value in raw.items() if isinstance(raw, dict) else raw:
        if value is True:
            raise ApiError(
                400,
                "logit_bias: a bias is a number, or false to ban the token",
                code="invalid_request",
                param="logit_bias",
            )
        token: int | str = int(key) if isinstance(key, str) and re.fullmatch(r"-?\d{1,12}", key) else key
        pairs.append((token, -math.inf if value is False else float(value)))
    return tuple(pairs)


def _stop(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(stop)


def common_refusals(req: ChatCompletionRequest | CompletionRequest) -> None:
    if req.n is not None and req.n != 1:
        raise unsupported("n", f"only n=1 is supported, got n={req.n}")
    if req.adaptive_target is not None and req.adaptive_target >= 0:
        msg = f"adaptive_target={req.adaptive_target} is not supported: adaptive-p sampling is not available"
        raise unsupported("adaptive_target", msg)
    _check_max_tokens(req)


def build_generation(
    req: ChatCompletionRequest | CompletionRequest,
    request_id: str,
    fallback_max_tokens: int,
    sources: Collection[str],
    **what: Any,
) -> GenerationRequest:
    spec = _speculative(req.speculative, sources)
    sampling = _sampling(req)
    stop = _stop(req.stop)
    limit = requested_max_tokens(req)
    breakers = req.dry_sequence_breakers
    try:
        return GenerationRequest(
            max_tokens=fallback_max_tokens if limit is None else limit,
            sampling=sampling,
            stop=stop,
            speculative=spec,
            request_id=request_id,
            cache_prompt=req.cache_prompt,
            logit_bias=_logit_bias(req.logit_bias),
            dry_sequence_breakers=DEFAULT_BREAKERS if breakers is None else tuple(breakers),
            **what,
        )
    except InvalidRequest as e:
        param = getattr(e, "param", None) or (
            "stop" if str(e).startswith("stop") else ("messages" if "message" in str(e) else None)
        )
        raise ApiError(400, str(e), code=e.code, param=param) from None


# -- responses -----------------------------------------------------------------------------------------------------
def usage(summary: GenerationSummary) -> Usage:
    completion = len(summary.tokens)
    return Usage(
        prompt_tokens=summary.prompt_tokens,
        completion_tokens=completion,
        total_tokens=summary.prompt_tokens + completion,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=summary.timings.cache_n),
        completion_tokens_details=None
        if summary.reasoning is None
        else CompletionTokensDetails(reasoning_tokens=summary.reasoning["reasoning_tokens"]),
    )


def per_source(summary: GenerationSummary) -> dict[str, Any] | None:
    """The request's statistics per draft source with its content class and the source memory's warm start."""
    if not summary.per_source and summary.source_memory is None:
        return None
    return {
        "class": summary.content_class,
        "subclass": summary.content_subclass,
        "sources": summary.per_source,
        "memory": summary.source_memory,
    }


def response_extras(summary: GenerationSummary) -> dict[str, Any]:
    """DynaDraft's fields beside OpenAI's in a final response or chunk: timings, the DD record, per-source stats."""
    return {
        "timings": summary.timings.to_dict(),
        "dynamic_draft": summary.dynamic_draft,
        "per_source": per_source(summary),
        **({"reasoning_budget": summary.reasoning} if summary.reasoning is not None else {}),
    }


def finish_reason(summary: GenerationSummary) -> str:
    # "cancelled" only happens when the client went away, so nobody reads it; keep OpenAI's vocabulary anyway.
    return "stop" if summary.finish_reason == "cancelled" else summary.finish_reason


# -- streaming -----------------------------------------------------------------------------------------------------
def sse(payload: BaseModel) -> str:
    return f"data: {payload.model_dump_json(exclude_none=True)}\n\n"


@dataclass
class StreamFormat:
    """How one dialect frames a stream: its opening chunks, one text delta, and the closing chunks."""

    id: str
    created: int
    model: str
    include_usage: bool
    done_line: ClassVar[str] = "data: [DONE]\n\n"  # what ends the stream (OpenAI's marker; "" for none)

    def opening(self) -> list[str]:
        return []

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> list[str]:
        """The chunks for newly generated text (and, when asked for, its tokens' logprobs)."""
        raise NotImplementedError

    def closing(self, done: DoneEvent) -> list[str]:
        raise NotImplementedError

    def error(self, err: ApiError) -> str:
        """An error after the stream began (its status line is sent): OpenAI's envelope as one more event."""
        return f"data: {json.dumps(err.body())}\n\n"
