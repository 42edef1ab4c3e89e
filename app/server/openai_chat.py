"""The OpenAI chat-completions dialect: messages in, a completion or `chat.completion.chunk` stream out."""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from app.engine.chat_format import ChatOutputParser, OutputPiece, ToolCall
from app.engine.reasoning_budget import MAX_MESSAGE_CHARS
from app.engine.types import MAX_TOP_LOGPROBS, DoneEvent, GenerationRequest, GenerationSummary, TokenLogprob
from app.server import tools as tool_syntax
from app.server.body import parse_body
from app.server.constraints import chat_grammar
from app.server.errors import ApiError
from app.server.flow import CompletionFlow
from app.server.logprobs import TokenTexts, chat_logprobs
from app.server.openai_common import (
    StreamFormat,
    build_generation,
    common_refusals,
    finish_reason,
    response_extras,
    sse,
    unsupported,
    usage,
)
from app.server.schemas import (
    AssistantMessage,
    ChatChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatMessage,
    ChunkChoice,
    ChunkDelta,
    FunctionCallOut,
    ToolCallDelta,
    ToolCallOut,
)


def _message(m: ChatMessage, i: int) -> dict[str, Any]:
    param = f"messages.{i}"
    if m.role == "function":
        raise unsupported(f"{param}.role", "legacy function messages are not supported: send role 'tool' messages")
    extra = m.model_extra or {}
    if extra.get("function_call"):
        raise unsupported(f"{param}.function_call", "legacy function_call is not supported: send tool_calls")
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
                raise unsupported(
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


def chat_to_generation(
    req: ChatCompletionRequest, *, sources: Collection[str], request_id: str = "", max_tokens: int = 1
) -> GenerationRequest:
    """Validate a chat request and build the engine request; `max_tokens` is the fallback when the client gave none.

    Raises ApiError (400) for anything the engine cannot honour, so refusals are clear rather than silently ignored.
    """
    common_refusals(req)
    if req.functions or req.function_call not in (None, "none"):
        param = "functions" if req.functions else "function_call"
        raise unsupported(param, "legacy functions / function_call are not supported: send tools / tool_choice")
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
    return build_generation(
        req,
        request_id,
        max_tokens,
        sources,
        messages=messages,
        grammar=chat_grammar(req),
        logprobs=(req.top_logprobs or 0) if req.logprobs else None,
        tools=tools,
        template_kwargs=req.chat_template_kwargs,
        echo_open_think=options.think,
        **_reasoning_budget(req),
    )


def _reasoning_budget(req: ChatCompletionRequest) -> dict[str, Any]:
    """llama-server's reasoning-budget fields as the engine request's (reasoning_budget_tokens first, then its
    other name thinking_budget_tokens); absent, the server's --reasoning-budget applies."""
    name = "reasoning_budget_tokens" if req.reasoning_budget_tokens is not None else "thinking_budget_tokens"
    budget = getattr(req, name)
    if budget is not None and budget < -1:
        raise ApiError(
            400, f"{name} must be -1 (no limit), 0 or more, got {budget}", code="invalid_request", param=name
        )
    message = req.reasoning_budget_message or ""
    if len(message) > MAX_MESSAGE_CHARS:
        msg = f"reasoning_budget_message: at most {MAX_MESSAGE_CHARS} characters"
        raise ApiError(400, msg, code="invalid_request", param="reasoning_budget_message")
    return {"reasoning_budget": budget, "reasoning_budget_message": message}


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

    def parse(self, text: str) -> ChatOutputParser:
        """A whole reply read at once (a response that is not streamed): its .content, .reasoning and .calls."""
        out = self.parser()
        out.push(text)
        out.finish()
        return out


@dataclass
class PieceStream(StreamFormat):
    """A stream whose dialect frames the parser's pieces itself (Anthropic's blocks, the Responses API's items):
    `pieces` turns newly certain pieces into that dialect's events; `finish` the last ones, at the end."""

    options: OutputOptions | None = None

    def __post_init__(self) -> None:
        assert self.options is not None
        self.parser = self.options.parser()

    def pieces(self, pieces: list[OutputPiece]) -> list[str]:
        raise NotImplementedError

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> list[str]:
        return self.pieces(self.parser.push(text))

    def finish(self) -> list[str]:
        return self.pieces(self.parser.finish())


def output_options(req: ChatCompletionRequest) -> OutputOptions:
    return OutputOptions(
        think=req.reasoning_format != "none",
        tools=bool(req.tools) and req.tool_choice != "none",
        parallel=req.parallel_tool_calls is not False,
        logprobs=bool(req.logprobs),
        tool_names=frozenset(t.function.name for t in req.tools or ()),
    )


def _tool_call_out(call: ToolCall) -> ToolCallOut:
    return ToolCallOut(id=call.id, function=FunctionCallOut(name=call.name, arguments=call.arguments))


def chat_completion(
    summary: GenerationSummary, options: OutputOptions, *, id: str, created: int, model: str
) -> ChatCompletion:
    out = options.parse(summary.text)
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
        **response_extras(summary),
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
    extras = response_extras(summary)
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


@dataclass
class ChatFormat(StreamFormat):
    options: OutputOptions | None = None

    def __post_init__(self) -> None:
        assert self.options is not None
        self.stream = ChatStream(self.options, id=self.id, created=self.created, model=self.model)

    def opening(self) -> list[str]:
        return [sse(chat_chunk(id=self.id, created=self.created, model=self.model, content="", role=True))]

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> list[str]:
        return [sse(c) for c in self.stream.text(text, logprobs)]

    def closing(self, done: DoneEvent) -> list[str]:
        return [sse(c) for c in self.stream.closing(done.summary, self.include_usage)]


def install(app: FastAPI, flow: CompletionFlow) -> None:
    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req = await parse_body(request, ChatCompletionRequest, flow.state.max_body_bytes)
        options = output_options(req)
        fmt = functools.partial(ChatFormat, options=options)
        to_body = functools.partial(chat_completion, options=options)
        return await flow.generate(request, req, "chatcmpl-", chat_to_generation, fmt, to_body)
