"""The OpenAI chat-completions dialect: messages in, a completion or `chat.completion.chunk` stream out."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.server.body import parse_body
from app.server.errors import ApiError
from app.server.flow import CompletionFlow
from app.server.openai_common import (
    StreamFormat,
    build_generation,
    common_refusals,
    finish_reason,
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
)


def _message(m: ChatMessage, i: int) -> dict[str, str]:
    param = f"messages.{i}"
    if m.role == "function":
        raise unsupported(f"{param}.role", "function messages are not supported (no tool calling)")
    extra = m.model_extra or {}
    if extra.get("tool_calls") or extra.get("function_call"):
        raise unsupported(f"{param}.tool_calls", "tool calls are not supported")
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
    return {"role": role, "content": content}


def chat_to_generation(
    req: ChatCompletionRequest, *, has_draft: bool, request_id: str = "", max_tokens: int = 1
) -> GenerationRequest:
    """Validate a chat request and build the engine request; `max_tokens` is the fallback when the client gave none.

    Raises ApiError (400) for anything the engine cannot honour, so refusals are clear rather than silently ignored.
    """
    common_refusals(req)
    if req.tools or req.functions:
        raise unsupported("tools" if req.tools else "functions", "tool / function calling is not supported")
    if req.tool_choice not in (None, "none") or req.function_call not in (None, "none"):
        raise unsupported("tool_choice", "tool / function calling is not supported")
    if req.response_format is not None and req.response_format.type != "text":
        raise unsupported(
            "response_format", f"response_format {req.response_format.type!r} is not supported (only 'text')"
        )
    if req.logprobs or req.top_logprobs:
        raise unsupported("logprobs", "logprobs are not supported by this server")
    if not req.messages:
        raise ApiError(400, "messages must not be empty", code="invalid_request", param="messages")
    messages = tuple(_message(m, i) for i, m in enumerate(req.messages))
    return build_generation(req, request_id, max_tokens, has_draft, messages=messages)


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


class ChatFormat(StreamFormat):
    def opening(self) -> list[str]:
        return [sse(chat_chunk(id=self.id, created=self.created, model=self.model, content="", role=True))]

    def text(self, text: str) -> str:
        return sse(chat_chunk(id=self.id, created=self.created, model=self.model, content=text))

    def closing(self, done: DoneEvent) -> list[str]:
        chunks = chat_final_chunks(
            done.summary, id=self.id, created=self.created, model=self.model, include_usage=self.include_usage
        )
        return [sse(c) for c in chunks]


def install(app: FastAPI, flow: CompletionFlow) -> None:
    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req = await parse_body(request, ChatCompletionRequest, flow.state.max_body_bytes)
        return await flow.generate(request, req, "chatcmpl", chat_to_generation, ChatFormat, chat_completion)
