"""Pure conversions between the wire models and the engine's types (no I/O, no engine calls)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from app.engine.types import GenerationRequest, GenerationSummary, InvalidRequest
from app.runtime.sampling import SamplingParams
from app.server.errors import ApiError
from app.server.schemas import (
    AssistantMessage,
    ChatChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatMessage,
    ChunkChoice,
    ChunkDelta,
    Completion,
    CompletionChoice,
    CompletionRequest,
    PromptTokensDetails,
    SpeculativeOptions,
    Usage,
)
from app.speculative import registry
from app.speculative.settings import SpecSettings, from_intent

# OpenAI's default when a request leaves temperature out (llama.cpp uses 0.8); clients that want greedy send 0.
DEFAULT_TEMPERATURE = 1.0


def _unsupported(param: str, message: str) -> ApiError:
    return ApiError(400, message, code="unsupported_feature", param=param)


# -- requests ------------------------------------------------------------------------------------------------------
def requested_max_tokens(req: ChatCompletionRequest | CompletionRequest) -> int | None:
    """The client's token limit (`max_completion_tokens` wins over the legacy `max_tokens`), or None if unset."""
    if isinstance(req, ChatCompletionRequest) and req.max_completion_tokens is not None:
        return req.max_completion_tokens
    return req.max_tokens


def _check_max_tokens(req: ChatCompletionRequest | CompletionRequest) -> None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = getattr(req, name, None)
        if value is not None and value < 1:
            raise ApiError(400, f"{name} must be >= 1, got {value}", code="invalid_request", param=name)


def _sampling(req: ChatCompletionRequest | CompletionRequest) -> SamplingParams:
    seed = req.seed
    if seed is not None and seed < 0:
        if seed != -1:
            raise ApiError(
                400, f"seed must be >= 0 (or -1 for random), got {seed}", code="invalid_request", param="seed"
            )
        seed = None  # llama.cpp's convention: -1 means a random seed
    values: dict[str, Any] = {
        "temperature": DEFAULT_TEMPERATURE if req.temperature is None else req.temperature,
        "top_p": req.top_p,
        "top_k": req.top_k,
        "min_p": req.min_p,
        "repeat_penalty": req.repeat_penalty,
        "presence_penalty": req.presence_penalty,
        "frequency_penalty": req.frequency_penalty,
        "seed": seed,
    }
    try:
        return SamplingParams(**{k: v for k, v in values.items() if v is not None or k == "seed"})
    except ValueError as e:
        # SamplingParams' messages start with the offending field name ("top_p must be in (0, 1]").
        match = re.match(r"[a-z_]+", str(e))
        raise ApiError(400, str(e), code="invalid_request", param=match.group(0) if match else None) from None


def _speculative(opts: SpeculativeOptions | None, has_draft: bool) -> SpecSettings | None:
    """The request's SpecSettings override; unspecified fields take the shared defaults (settings.from_intent)."""
    if opts is None:
        return None
    data = opts.model_dump(exclude_none=True)
    if not data:
        return None  # an empty object asks for nothing: let Dynamic Draft / the engine defaults decide
    source = data.pop("source", None) or registry.default_source(has_draft)
    if registry.needs_draft_model(source) and not has_draft:
        raise ApiError(
            400,
            f"speculative.source {source!r} needs a draft model and none is loaded; use 'lookup' or 'none'",
            code="invalid_request",
            param="speculative.source",
        )
    try:
        return from_intent(source, draft_loaded=has_draft, **data)
    except ValueError as e:
        match = re.match(r"(speculative\.[a-z_]+)", str(e))
        raise ApiError(400, str(e), code="invalid_request", param=match.group(1) if match else "speculative") from None


def _stop(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(stop)


def _message(m: ChatMessage, i: int) -> dict[str, str]:
    param = f"messages.{i}"
    if m.role == "function":
        raise _unsupported(f"{param}.role", "function messages are not supported (no tool calling)")
    extra = m.model_extra or {}
    if extra.get("tool_calls") or extra.get("function_call"):
        raise _unsupported(f"{param}.tool_calls", "tool calls are not supported")
    if m.content is None:
        if m.role != "assistant":
            raise ApiError(400, f"{param}.content is required", code="invalid_request", param=f"{param}.content")
        content = ""
    elif isinstance(m.content, str):
        content = m.content
    else:
        pieces = []
        for j, part in enumerate(m.content):
            if part.type != "text" or part.text is None:
                raise _unsupported(
                    f"{param}.content.{j}", f"only text content parts are supported, got type {part.type!r}"
                )
            pieces.append(part.text)
        content = "".join(pieces)
    role = "system" if m.role == "developer" else m.role
    return {"role": role, "content": content}


def _common_refusals(req: ChatCompletionRequest | CompletionRequest) -> None:
    if req.n is not None and req.n != 1:
        raise _unsupported("n", f"only n=1 is supported, got n={req.n}")
    if req.logit_bias:
        raise _unsupported("logit_bias", "logit_bias is not supported")
    _check_max_tokens(req)


def chat_to_generation(
    req: ChatCompletionRequest, *, has_draft: bool, request_id: str = "", max_tokens: int = 1
) -> GenerationRequest:
    """Validate a chat request and build the engine request; `max_tokens` is the fallback when the client gave none.

    Raises ApiError (400) for anything the engine cannot honour, so refusals are clear rather than silently ignored.
    """
    _common_refusals(req)
    if req.tools or req.functions:
        raise _unsupported("tools" if req.tools else "functions", "tool / function calling is not supported")
    if req.tool_choice not in (None, "none") or req.function_call not in (None, "none"):
        raise _unsupported("tool_choice", "tool / function calling is not supported")
    if req.response_format is not None and req.response_format.type != "text":
        raise _unsupported(
            "response_format", f"response_format {req.response_format.type!r} is not supported (only 'text')"
        )
    if req.logprobs or req.top_logprobs:
        raise _unsupported("logprobs", "logprobs are not supported by this server")
    if not req.messages:
        raise ApiError(400, "messages must not be empty", code="invalid_request", param="messages")
    messages = tuple(_message(m, i) for i, m in enumerate(req.messages))
    return _build(req, request_id, max_tokens, has_draft, messages=messages)


def completion_to_generation(
    req: CompletionRequest, *, has_draft: bool, request_id: str = "", max_tokens: int = 1
) -> GenerationRequest:
    """Validate a text-completion request and build the engine request (raw prompt, no chat template)."""
    _common_refusals(req)
    if req.logprobs is not None:
        raise _unsupported("logprobs", "logprobs are not supported by this server")
    if req.echo:
        raise _unsupported("echo", "echo is not supported")
    if req.best_of is not None and req.best_of != 1:
        raise _unsupported("best_of", "only best_of=1 is supported")
    if req.suffix:
        raise _unsupported("suffix", "suffix (fill-in-the-middle) is not supported")
    prompt = req.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            if prompt and not isinstance(prompt[0], str):
                raise _unsupported("prompt", "token-id prompts are not supported; send the prompt as text")
            raise _unsupported("prompt", "exactly one prompt string is supported (batched prompts are not)")
        prompt = prompt[0]
    assert isinstance(prompt, str)
    if not prompt:
        raise ApiError(400, "prompt must not be empty", code="invalid_request", param="prompt")
    return _build(req, request_id, max_tokens, has_draft, prompt=prompt)


def _build(
    req: ChatCompletionRequest | CompletionRequest,
    request_id: str,
    fallback_max_tokens: int,
    has_draft: bool,
    **what: Any,
) -> GenerationRequest:
    spec = _speculative(req.speculative, has_draft)
    sampling = _sampling(req)
    stop = _stop(req.stop)
    limit = requested_max_tokens(req)
    try:
        return GenerationRequest(
            max_tokens=fallback_max_tokens if limit is None else limit,
            sampling=sampling,
            stop=stop,
            speculative=spec,
            request_id=request_id,
            cache_prompt=req.cache_prompt,
            **what,
        )
    except InvalidRequest as e:
        param = "stop" if str(e).startswith("stop") else ("messages" if "message" in str(e) else None)
        raise ApiError(400, str(e), code=e.code, param=param) from None


def with_max_tokens(request: GenerationRequest, max_tokens: int) -> GenerationRequest:
    return replace(request, max_tokens=max_tokens)


# -- responses -----------------------------------------------------------------------------------------------------
def usage(summary: GenerationSummary) -> Usage:
    completion = len(summary.tokens)
    return Usage(
        prompt_tokens=summary.prompt_tokens,
        completion_tokens=completion,
        total_tokens=summary.prompt_tokens + completion,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=summary.timings.cache_n),
    )


def finish_reason(summary: GenerationSummary) -> str:
    # "cancelled" only happens when the client went away, so nobody reads it; keep OpenAI's vocabulary anyway.
    return "stop" if summary.finish_reason == "cancelled" else summary.finish_reason


def chat_completion(summary: GenerationSummary, *, id: str, created: int, model: str) -> ChatCompletion:
    return ChatCompletion(
        id=id,
        created=created,
        model=model,
        choices=[ChatChoice(message=AssistantMessage(content=summary.text), finish_reason=finish_reason(summary))],
        usage=usage(summary),
        timings=summary.timings.to_dict(),
        dynamic_draft=summary.dynamic_draft,
    )


def chat_chunk(
    *, id: str, created: int, model: str, content: str | None = None, role: bool = False
) -> ChatCompletionChunk:
    delta = ChunkDelta(role="assistant" if role else None, content=content)
    return ChatCompletionChunk(id=id, created=created, model=model, choices=[ChunkChoice(delta=delta)])


def chat_final_chunks(
    summary: GenerationSummary, *, id: str, created: int, model: str, include_usage: bool
) -> list[ChatCompletionChunk]:
    """The closing chunk (finish_reason, timings, dynamic_draft) and, when asked, OpenAI's usage-only chunk."""
    extras: dict[str, Any] = {"timings": summary.timings.to_dict(), "dynamic_draft": summary.dynamic_draft}
    chunks = [
        ChatCompletionChunk(
            id=id,
            created=created,
            model=model,
            choices=[ChunkChoice(delta=ChunkDelta(), finish_reason=finish_reason(summary))],
            **extras,
        )
    ]
    if include_usage:
        chunks.append(
            ChatCompletionChunk(id=id, created=created, model=model, choices=[], usage=usage(summary), **extras)
        )
    return chunks


def completion(summary: GenerationSummary, *, id: str, created: int, model: str) -> Completion:
    return Completion(
        id=id,
        created=created,
        model=model,
        choices=[CompletionChoice(text=summary.text, finish_reason=finish_reason(summary))],
        usage=usage(summary),
        timings=summary.timings.to_dict(),
        dynamic_draft=summary.dynamic_draft,
    )


def completion_chunk(*, id: str, created: int, model: str, text: str) -> Completion:
    return Completion(id=id, created=created, model=model, choices=[CompletionChoice(text=text, finish_reason=None)])


def completion_final_chunks(
    summary: GenerationSummary, *, id: str, created: int, model: str, include_usage: bool
) -> list[Completion]:
    extras: dict[str, Any] = {"timings": summary.timings.to_dict(), "dynamic_draft": summary.dynamic_draft}
    final = Completion(
        id=id,
        created=created,
        model=model,
        choices=[CompletionChoice(text="", finish_reason=finish_reason(summary))],
        usage=usage(summary) if include_usage else None,
        **extras,
    )
    return [final]
