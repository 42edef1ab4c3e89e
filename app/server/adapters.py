"""Pure conversions between the wire models and the engine's types (no I/O, no engine calls)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from app.engine.sampling import SamplingParams
from app.engine.types import MAX_TOP_LOGPROBS, GenerationRequest, GenerationSummary, InvalidRequest
from app.server import tools as tool_syntax
from app.server.chat_output import ChatOutputParser, OutputPiece
from app.server.errors import ApiError
from app.server.logprobs import TokenTexts, chat_logprobs, completion_logprobs
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
    CompletionLogprobs,
    CompletionRequest,
    FunctionCallOut,
    PromptTokensDetails,
    SpeculativeOptions,
    ToolCallDelta,
    ToolCallOut,
    Usage,
)
from app.server.structured import JSON_OBJECT_SCHEMA, SchemaError, json_schema_grammar
from app.speculative.settings import SpecSettings

# OpenAI's default when a request leaves temperature out (llama.cpp uses 0.8); clients that want greedy send 0.
DEFAULT_TEMPERATURE = 1.0
# What a `speculative` override drafts when it names a source but no depth (as `dynadraft generate` does).
DEFAULT_SPEC_N_MAX = 8


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
    """The request's SpecSettings override; unspecified fields follow `dynadraft generate`'s defaults."""
    if opts is None:
        return None
    data = opts.model_dump(exclude_none=True)
    if not data:
        return None  # an empty object asks for nothing: let Dynamic Draft / the engine defaults decide
    source = data.setdefault("source", "draft" if has_draft else "lookup")
    if source in ("draft", "pool") and not has_draft:
        raise ApiError(
            400,
            f"speculative.source {source!r} needs a draft model and none is loaded; use 'lookup' or 'none'",
            code="invalid_request",
            param="speculative.source",
        )
    if source != "none":
        data.setdefault("n_max", DEFAULT_SPEC_N_MAX)
    try:
        return SpecSettings.from_dict(data)
    except ValueError as e:
        match = re.match(r"(speculative\.[a-z_]+)", str(e))
        raise ApiError(400, str(e), code="invalid_request", param=match.group(1) if match else "speculative") from None


def _stop(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(stop)


def _message(m: ChatMessage, i: int) -> dict[str, Any]:
    param = f"messages.{i}"
    if m.role == "function":
        raise _unsupported(f"{param}.role", "legacy function messages are not supported: send role 'tool' messages")
    extra = m.model_extra or {}
    if extra.get("function_call"):
        raise _unsupported(f"{param}.function_call", "legacy function_call is not supported: send tool_calls")
    if m.tool_calls and m.role != "assistant":
        raise ApiError(400, f"{param}: only assistant messages carry tool_calls", code="invalid_request", param=param)
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
    out: dict[str, Any] = {"role": role, "content": content}
    if m.tool_calls:
        calls = [c.model_dump(exclude_none=True) for c in m.tool_calls]
        out = tool_syntax.template_message({**out, "tool_calls": calls})
    if m.role == "tool" and m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    if m.reasoning_content is not None:
        out["reasoning_content"] = m.reasoning_content  # reasoning templates decide whether past thinking is shown
    return out


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
    if req.functions or req.function_call not in (None, "none"):
        param = "functions" if req.functions else "function_call"
        raise _unsupported(param, "legacy functions / function_call are not supported: send tools / tool_choice")
    if req.top_logprobs is not None and not req.logprobs:
        raise ApiError(400, "top_logprobs needs logprobs: true", code="invalid_request", param="top_logprobs")
    if req.top_logprobs is not None and not 0 <= req.top_logprobs <= MAX_TOP_LOGPROBS:
        msg = f"top_logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {req.top_logprobs}"
        raise ApiError(400, msg, code="invalid_request", param="top_logprobs")
    if not req.messages:
        raise ApiError(400, "messages must not be empty", code="invalid_request", param="messages")
    messages = tuple(_message(m, i) for i, m in enumerate(req.messages))
    options = output_options(req)
    tools = tuple(t.model_dump(exclude_none=True) for t in req.tools or ()) if options.tools else None
    return _build(
        req,
        request_id,
        max_tokens,
        has_draft,
        messages=messages,
        grammar=_chat_grammar(req),
        logprobs=(req.top_logprobs or 0) if req.logprobs else None,
        tools=tools,
        template_kwargs=req.chat_template_kwargs,
        echo_open_think=options.think,
    )


@dataclass(frozen=True)
class OutputOptions:
    """How a chat response is read back: <think> split off, tool calls parsed, logprobs reported."""

    think: bool
    tools: bool
    parallel: bool
    logprobs: bool
    tool_names: frozenset[str] = frozenset()

    def parser(self) -> ChatOutputParser:
        return ChatOutputParser(think=self.think, tools=self.tools, parallel=self.parallel, tool_names=self.tool_names)


def output_options(req: ChatCompletionRequest) -> OutputOptions:
    return OutputOptions(
        think=req.reasoning_format != "none",
        tools=bool(req.tools) and req.tool_choice != "none",
        parallel=req.parallel_tool_calls is not False,
        logprobs=bool(req.logprobs),
        tool_names=frozenset(t.function.name for t in req.tools or ()),
    )


def _schema_grammar(schema: Any, param: str) -> str:
    try:
        return json_schema_grammar(schema)
    except SchemaError as e:
        raise ApiError(400, f"{param}: invalid JSON schema: {e}", code="invalid_schema", param=param) from None


def _response_format_grammar(req: ChatCompletionRequest) -> str | None:
    fmt = req.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return _schema_grammar(fmt.schema_ or JSON_OBJECT_SCHEMA, "response_format.schema")
    if fmt.type == "json_schema":
        if fmt.json_schema is None or fmt.json_schema.schema_ is None:
            msg = "response_format json_schema needs json_schema.schema (the JSON schema itself)"
            raise ApiError(400, msg, code="invalid_request", param="response_format.json_schema")
        return _schema_grammar(fmt.json_schema.schema_, "response_format.json_schema.schema")
    msg = f"response_format type must be 'text', 'json_object' or 'json_schema', got {fmt.type!r}"
    raise ApiError(400, msg, code="invalid_request", param="response_format.type")


def _tool_choice_grammar(req: ChatCompletionRequest) -> str | None:
    choice = req.tool_choice
    if choice in (None, "auto", "none"):
        return None
    if not req.tools:
        msg = "tool_choice 'required' or a named function needs tools"
        raise ApiError(400, msg, code="invalid_request", param="tool_choice")
    tools = [t.model_dump(exclude_none=True) for t in req.tools]
    name = None if isinstance(choice, str) else choice.function.name
    if name is not None and name not in {t["function"]["name"] for t in tools}:
        raise ApiError(
            400,
            f"tool_choice names {name!r}, which is not in tools",
            code="invalid_request",
            param="tool_choice.function.name",
        )
    try:
        return tool_syntax.tool_choice_grammar(tools, name, parallel=req.parallel_tool_calls is not False)
    except SchemaError as e:
        raise ApiError(400, f"invalid JSON schema in {e}", code="invalid_schema", param="tools") from None


def _chat_grammar(req: ChatCompletionRequest) -> str | None:
    """The one grammar a chat request asks for (response_format, tool_choice, grammar or json_schema)."""
    found = {
        "response_format": _response_format_grammar(req),
        "tool_choice": _tool_choice_grammar(req),
        **_raw_grammars(req),
    }
    given = {k: v for k, v in found.items() if v is not None}
    if len(given) > 1:
        names = " and ".join(sorted(given))
        raise ApiError(
            400, f"{names} each constrain the output: give only one", code="invalid_request", param=sorted(given)[1]
        )
    return next(iter(given.values()), None)


def _raw_grammars(req: ChatCompletionRequest | CompletionRequest) -> dict[str, str | None]:
    """llama.cpp's own fields: `grammar` (GBNF, checked by llama.cpp when the request runs) and `json_schema`."""
    if req.grammar is not None and not req.grammar.strip():
        raise ApiError(400, "grammar must not be empty", code="invalid_request", param="grammar")
    schema = None if req.json_schema is None else _schema_grammar(req.json_schema, "json_schema")
    return {"grammar": req.grammar, "json_schema": schema}


def completion_to_generation(
    req: CompletionRequest, *, has_draft: bool, request_id: str = "", max_tokens: int = 1
) -> GenerationRequest:
    """Validate a text-completion request and build the engine request (raw prompt, no chat template)."""
    _common_refusals(req)
    if req.logprobs is not None and not 0 <= req.logprobs <= MAX_TOP_LOGPROBS:
        msg = f"logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {req.logprobs}"
        raise ApiError(400, msg, code="invalid_request", param="logprobs")
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
    grammars = {k: v for k, v in _raw_grammars(req).items() if v is not None}
    if len(grammars) > 1:
        raise ApiError(
            400,
            "grammar and json_schema each constrain the output: give only one",
            code="invalid_request",
            param="json_schema",
        )
    return _build(
        req,
        request_id,
        max_tokens,
        has_draft,
        prompt=prompt,
        grammar=next(iter(grammars.values()), None),
        logprobs=req.logprobs,
    )


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
            pool=spec is not None and spec.source == "pool",
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


def _tool_call_out(call: tool_syntax.ToolCall) -> ToolCallOut:
    return ToolCallOut(id=call.id, function=FunctionCallOut(name=call.name, arguments=call.arguments))


def chat_completion(
    summary: GenerationSummary, options: OutputOptions, *, id: str, created: int, model: str
) -> ChatCompletion:
    out = options.parser()
    out.push(summary.text)
    out.finish()
    calls = [_tool_call_out(c) for c in out.calls] or None
    message = AssistantMessage(
        content=out.content if (out.content or not calls) else None,
        reasoning_content=out.reasoning or None,
        tool_calls=calls,
    )
    logprobs = chat_logprobs(summary.logprobs, TokenTexts()) if options.logprobs else None
    reason = "tool_calls" if calls else finish_reason(summary)
    return ChatCompletion(
        id=id,
        created=created,
        model=model,
        choices=[ChatChoice(message=message, finish_reason=reason, logprobs=logprobs)],
        usage=usage(summary),
        timings=summary.timings.to_dict(),
        dynamic_draft=summary.dynamic_draft,
    )


def chat_chunk(
    *, id: str, created: int, model: str, content: str | None = None, role: bool = False
) -> ChatCompletionChunk:
    delta = ChunkDelta(role="assistant" if role else None, content=content)
    return ChatCompletionChunk(id=id, created=created, model=model, choices=[ChunkChoice(delta=delta)])


class ChatStream:
    """One streamed chat response: splits the text into content / reasoning / tool-call deltas as it arrives."""

    def __init__(self, options: OutputOptions, *, id: str, created: int, model: str) -> None:
        self.options = options
        self.parser = options.parser()
        self.texts = TokenTexts()
        self._head: dict[str, Any] = {"id": id, "created": created, "model": model}

    def _chunk(self, delta: ChunkDelta, **choice: Any) -> ChatCompletionChunk:
        return ChatCompletionChunk(**self._head, choices=[ChunkChoice(delta=delta, **choice)])

    def _deltas(self, pieces: list[OutputPiece]) -> list[ChunkDelta]:
        out = []
        for p in pieces:
            if p.kind == "content":
                out.append(ChunkDelta(content=p.text))
            elif p.kind == "reasoning":
                out.append(ChunkDelta(reasoning_content=p.text))
            elif p.call is not None:
                index = self.parser.calls.index(p.call)
                fn = FunctionCallOut(name=p.call.name, arguments=p.call.arguments)
                out.append(
                    ChunkDelta(tool_calls=[ToolCallDelta(index=index, id=p.call.id, type="function", function=fn)])
                )
        return out

    def text(self, text: str, logprobs: tuple[Any, ...] = ()) -> list[ChatCompletionChunk]:
        deltas = self._deltas(self.parser.push(text))
        lp = chat_logprobs(logprobs, self.texts) if self.options.logprobs and logprobs else None
        if lp is not None and not deltas:
            deltas = [ChunkDelta()]  # the text is held back (a tag may be starting): send its logprobs anyway
        return [self._chunk(d, logprobs=lp if i == 0 else None) for i, d in enumerate(deltas)]

    def closing(self, summary: GenerationSummary, include_usage: bool) -> list[ChatCompletionChunk]:
        chunks = [self._chunk(d) for d in self._deltas(self.parser.finish())]
        reason = "tool_calls" if self.parser.calls else finish_reason(summary)
        return chunks + chat_final_chunks(summary, **self._head, include_usage=include_usage, reason=reason)


def chat_final_chunks(
    summary: GenerationSummary, *, id: str, created: int, model: str, include_usage: bool, reason: str | None = None
) -> list[ChatCompletionChunk]:
    """The closing chunk (finish_reason, timings, dynamic_draft) and, when asked, OpenAI's usage-only chunk."""
    extras: dict[str, Any] = {"timings": summary.timings.to_dict(), "dynamic_draft": summary.dynamic_draft}
    chunks = [
        ChatCompletionChunk(
            id=id,
            created=created,
            model=model,
            choices=[ChunkChoice(delta=ChunkDelta(), finish_reason=reason or finish_reason(summary))],
            **extras,
        )
    ]
    if include_usage:
        chunks.append(
            ChatCompletionChunk(id=id, created=created, model=model, choices=[], usage=usage(summary), **extras)
        )
    return chunks


def completion(
    summary: GenerationSummary, *, id: str, created: int, model: str, logprobs: int | None = None
) -> Completion:
    lp = None if logprobs is None else completion_logprobs(summary.logprobs, TokenTexts(), with_top=logprobs > 0)
    return Completion(
        id=id,
        created=created,
        model=model,
        choices=[CompletionChoice(text=summary.text, finish_reason=finish_reason(summary), logprobs=lp)],
        usage=usage(summary),
        timings=summary.timings.to_dict(),
        dynamic_draft=summary.dynamic_draft,
    )


def completion_chunk(
    *, id: str, created: int, model: str, text: str, logprobs: CompletionLogprobs | None = None
) -> Completion:
    choice = CompletionChoice(text=text, finish_reason=None, logprobs=logprobs)
    return Completion(id=id, created=created, model=model, choices=[choice])


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
