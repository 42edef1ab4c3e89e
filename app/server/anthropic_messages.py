"""Anthropic's Messages dialect: POST /v1/messages (and /count_tokens), read as a chat request, answered as blocks.

A Messages request is mapped onto the chat-completions request the engine already serves (system, turns, tools,
tool results), as llama-server's `server_chat_convert_anthropic_to_oai` does; the reply's text is split by the same
ChatOutputParser into thinking, text and tool_use blocks. Where this differs from llama-server, it is on purpose:
tool results come before the user's text (Anthropic's order, which templates expect right after the call),
`tool_choice` {"type": "tool"} forces that tool rather than any, and a stop string gives stop_reason "stop_sequence".
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from app.engine.chat_format import OutputPiece, ToolCall
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.server.body import parse_body
from app.server.errors import ApiError
from app.server.flow import CompletionFlow
from app.server.llama_template import count_prompt_tokens
from app.server.openai_chat import OutputOptions, PieceStream, chat_to_generation, output_options
from app.server.openai_common import response_extras, unsupported
from app.server.schemas import (
    ChatCompletionRequest,
    ChatMessage,
    FunctionCall,
    FunctionDef,
    NamedFunction,
    NamedToolChoice,
    ResponseFormat,
    SpeculativeOptions,
    Tool,
    ToolCallIn,
)

_STRICT = ConfigDict(strict=True, extra="ignore")  # cache_control and other fields the engine has no use for


# -- the request ---------------------------------------------------------------------------------------------------
class ContentBlock(BaseModel):
    """One block of a message: text, thinking, tool_use (assistant) or tool_result (user); others are refused."""

    model_config = _STRICT

    type: str
    text: str | None = None
    thinking: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    content: str | list[ContentBlock] | None = None
    is_error: bool | None = None


class MessageIn(BaseModel):
    model_config = _STRICT

    # "system" inside the conversation is Anthropic's newer form (Claude Code sends one after the first turn); it
    # reaches the template as a system message, which Qwen's templates render in place.
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlock]


class SystemBlock(BaseModel):
    model_config = _STRICT

    type: Literal["text"]
    text: str


class ToolIn(BaseModel):
    """A client tool (Anthropic's "custom" type); Anthropic's own server tools (web search, bash_...) are refused."""

    model_config = _STRICT

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    type: str | None = None


class ToolChoiceIn(BaseModel):
    model_config = _STRICT

    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingIn(BaseModel):
    model_config = _STRICT

    type: Literal["enabled", "disabled", "adaptive", "between_tools"]
    budget_tokens: int | None = None


class OutputFormatIn(BaseModel):
    model_config = _STRICT

    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfigIn(BaseModel):
    """`format` is honoured (a JSON schema the reply must follow, by grammar); `effort` is a hint Anthropic's own
    models weigh, with no counterpart in a local model, so it is accepted and has no effect."""

    model_config = _STRICT

    format: OutputFormatIn | None = None
    effort: str | None = None


class MessagesRequest(BaseModel):
    """Anthropic's fields, plus llama-server's `chat_template_kwargs` and DynaDraft's `speculative`. `max_tokens`
    may be left out (Anthropic requires it; llama-server and DynaDraft then generate up to the window's end)."""

    model_config = _STRICT

    model: str = Field(min_length=1)
    messages: list[MessageIn]
    max_tokens: int | None = Field(None, ge=1)  # Anthropic: at least 1 (the OpenAI routes also take -1)
    system: str | list[SystemBlock] | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    tools: list[ToolIn] | None = None
    tool_choice: ToolChoiceIn | None = None
    thinking: ThinkingIn | None = None
    output_config: OutputConfigIn | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    speculative: SpeculativeOptions | None = None


def _text_of(blocks: str | list[ContentBlock] | None, param: str) -> str:
    """A tool result's content as text: a string, or text blocks joined (images are refused, as in chat)."""
    if blocks is None or isinstance(blocks, str):
        return blocks or ""
    for j, b in enumerate(blocks):
        if b.type != "text" or b.text is None:
            raise unsupported(f"{param}.{j}", f"only text is supported in a tool result, got type {b.type!r}")
    return "".join(b.text or "" for b in blocks)


_BLOCKS = {
    "assistant": ("text", "thinking", "redacted_thinking", "tool_use"),
    "user": ("text", "tool_result"),
    "system": ("text",),
}


def _turn(m: MessageIn, i: int) -> list[ChatMessage]:
    """One Anthropic message as chat messages: a user message's tool results become `tool` messages first."""
    if isinstance(m.content, str):
        return [ChatMessage(role=m.role, content=m.content)]
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCallIn] = []
    results: list[ChatMessage] = []
    for j, b in enumerate(m.content):
        param = f"messages.{i}.content.{j}"
        allowed = _BLOCKS[m.role]
        if b.type not in allowed:
            what = "images and documents are not supported" if b.type in ("image", "document") else "not supported"
            raise unsupported(f"{param}.type", f"a {m.role} block of type {b.type!r}: {what}")
        if b.type == "text":
            texts.append(b.text or "")
        elif b.type == "thinking":
            thinking.append(b.thinking or "")
        elif b.type == "tool_use":
            if not b.name or b.id is None:
                raise ApiError(400, f"{param}: tool_use needs an id and a name", code="invalid_request", param=param)
            calls.append(ToolCallIn(id=b.id, function=FunctionCall(name=b.name, arguments=json.dumps(b.input or {}))))
        elif b.type == "tool_result":
            if b.tool_use_id is None:
                msg = f"{param}: tool_result needs a tool_use_id"
                raise ApiError(400, msg, code="invalid_request", param=f"{param}.tool_use_id")
            text = _text_of(b.content, f"{param}.content")
            # The template has no place for is_error: say it in the text, so the model still knows the call failed.
            results.append(
                ChatMessage(role="tool", tool_call_id=b.tool_use_id, content=f"Error: {text}" if b.is_error else text)
            )
        # redacted_thinking is encrypted reasoning from Anthropic's models: nothing a local model can read
    out = list(results)
    if texts or calls or thinking:
        out.append(
            ChatMessage(
                role=m.role,
                content="".join(texts),
                tool_calls=calls or None,
                reasoning_content="".join(thinking) or None,
            )
        )
    return out


# Claude Code opens its system prompt with "x-anthropic-billing-header: ...; cch=<stamp>;", a stamp that changes on
# every request. Left in, no two prompts would share more than that line, and the conversation cache would re-prefill
# the whole system prompt (thousands of tokens) each turn; a fixed stamp is what llama-server writes there too.
_BILLING_STAMP = re.compile(r"\A(x-anthropic-billing-header:[^\n]*?\bcch=)[^;\s]+;")


def _system(system: str | list[SystemBlock] | None) -> list[ChatMessage]:
    if system is None:
        return []
    texts = [system] if isinstance(system, str) else [b.text for b in system]
    text = "".join(_BILLING_STAMP.sub(r"\g<1>00000;", t) for t in texts)
    return [ChatMessage(role="system", content=text)]


def _tools(req: MessagesRequest) -> list[Tool] | None:
    if not req.tools:
        return None
    for i, t in enumerate(req.tools):
        if t.type not in (None, "custom"):
            raise unsupported(
                f"tools.{i}.type",
                f"Anthropic's server tool {t.type!r} is not available; send tools "
                "with an input_schema, which the model calls and the client runs",
            )
    return [
        Tool(type="function", function=FunctionDef(name=t.name, description=t.description, parameters=t.input_schema))
        for t in req.tools
    ]


def _tool_choice(choice: ToolChoiceIn | None) -> Literal["none", "auto", "required"] | NamedToolChoice | None:
    if choice is None:
        return None
    if choice.type == "tool":
        if not choice.name:
            raise ApiError(
                400, "tool_choice.name is required for type 'tool'", code="invalid_request", param="tool_choice.name"
            )
        return NamedToolChoice(type="function", function=NamedFunction(name=choice.name))
    return "required" if choice.type == "any" else choice.type


def _template_kwargs(req: MessagesRequest) -> dict[str, Any] | None:
    """Anthropic's `thinking` as the chat template variable reasoning models read (Qwen3's enable_thinking); its
    budget_tokens is the reasoning budget (to_chat)."""
    kwargs = dict(req.chat_template_kwargs or {})
    if req.thinking is not None and req.thinking.type in ("enabled", "disabled"):
        kwargs.setdefault("enable_thinking", req.thinking.type == "enabled")
    return kwargs or None


def _response_format(config: OutputConfigIn | None) -> ResponseFormat | None:
    if config is None or config.format is None:
        return None
    return ResponseFormat.for_schema(config.format.schema_)


def to_chat(req: MessagesRequest) -> ChatCompletionRequest:
    """The chat-completions request a Messages request means (refusing what the engine cannot honour)."""
    if not req.messages:
        raise ApiError(400, "messages must not be empty", code="invalid_request", param="messages")
    messages = _system(req.system) + [c for i, m in enumerate(req.messages) for c in _turn(m, i)]
    choice = req.tool_choice
    return ChatCompletionRequest(
        model=req.model,
        messages=messages,
        max_tokens=req.max_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=req.top_k,
        stop=req.stop_sequences,
        stream=req.stream,
        tools=_tools(req),
        tool_choice=_tool_choice(choice),
        parallel_tool_calls=None
        if choice is None or choice.disable_parallel_tool_use is None
        else not choice.disable_parallel_tool_use,
        chat_template_kwargs=_template_kwargs(req),
        response_format=_response_format(req.output_config),
        speculative=req.speculative,
        reasoning_budget_tokens=req.thinking.budget_tokens
        if req.thinking is not None and req.thinking.type == "enabled"
        else None,
    )


# -- the response --------------------------------------------------------------------------------------------------
def to_generation(req: ChatCompletionRequest, **kw: Any) -> GenerationRequest:
    """The chat request's engine request, its max_tokens a bound rather than a demand: Claude clients send their
    model's output limit (Claude Code: 32,000) whatever the window, and Anthropic's API then stops where the window
    ends (stop_reason "model_context_window_exceeded") instead of refusing the prompt."""
    return replace(chat_to_generation(req, **kw), until_context_end=True)


def stop_reason(summary: GenerationSummary, called: bool, max_tokens: int | None) -> str:
    if called:
        return "tool_use"
    if summary.finish_reason == "length":
        asked = max_tokens is not None and len(summary.tokens) >= max_tokens
        return "max_tokens" if asked else "model_context_window_exceeded"
    return "stop_sequence" if summary.stopping_word else "end_turn"


def usage(summary: GenerationSummary) -> dict[str, int]:
    """Anthropic's counts: input_tokens excludes the prompt tokens read from the cache (as llama-server counts)."""
    cached = summary.timings.cache_n
    return {
        "input_tokens": summary.prompt_tokens - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": len(summary.tokens),
    }


def _tool_use(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": json.loads(call.arguments)}


def message_body(
    summary: GenerationSummary, options: OutputOptions, max_tokens: int | None, *, id: str, created: int, model: str
) -> dict[str, Any]:
    """The non-streaming Message, with DynaDraft's `timings`, `dynamic_draft` and `per_source` beside it."""
    out = options.parse(summary.text)
    blocks: list[dict[str, Any]] = []
    if out.reasoning:
        blocks.append({"type": "thinking", "thinking": out.reasoning, "signature": ""})  # a local model signs nothing
    if out.content:
        blocks.append({"type": "text", "text": out.content})
    blocks += [_tool_use(c) for c in out.calls]
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason(summary, bool(out.calls), max_tokens),
        "stop_sequence": summary.stopping_word or None,
        "usage": usage(summary),
        **response_extras(summary),
    }


def event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"


@dataclass
class MessagesFormat(PieceStream):
    """Anthropic's stream: message_start, then each block opened, filled by deltas and closed in turn, then
    message_delta (stop_reason and the whole usage) and message_stop; no [DONE]."""

    done_line = ""
    max_tokens: int | None = None
    _open: str | None = field(default=None, init=False)  # the kind of the block being filled
    _index: int = field(default=-1, init=False)

    def opening(self) -> list[str]:
        # The prompt's size is known only at the end: message_delta carries the whole usage (as Anthropic's does).
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [event("message_start", {"message": message}), event("ping", {})]

    def _start(self, block: dict[str, Any]) -> list[str]:
        out = self._stop()
        self._index += 1
        self._open = block["type"]
        return [*out, event("content_block_start", {"index": self._index, "content_block": block})]

    def _stop(self) -> list[str]:
        if self._open is None:
            return []
        out = []
        if self._open == "thinking":  # Anthropic's clients expect a signature before a thinking block closes
            out.append(self._delta({"type": "signature_delta", "signature": ""}))
        self._open = None
        return [*out, event("content_block_stop", {"index": self._index})]

    def _delta(self, delta: dict[str, Any]) -> str:
        return event("content_block_delta", {"index": self._index, "delta": delta})

    def pieces(self, pieces: list[OutputPiece]) -> list[str]:
        out: list[str] = []
        for p in pieces:
            if p.call is not None:
                out += self._start({"type": "tool_use", "id": p.call.id, "name": p.call.name, "input": {}})
                out.append(self._delta({"type": "input_json_delta", "partial_json": p.call.arguments}))
                out += self._stop()
            elif p.kind == "reasoning":
                if self._open != "thinking":
                    out += self._start({"type": "thinking", "thinking": ""})
                out.append(self._delta({"type": "thinking_delta", "thinking": p.text}))
            elif p.text:
                if self._open != "text":
                    out += self._start({"type": "text", "text": ""})
                out.append(self._delta({"type": "text_delta", "text": p.text}))
        return out

    def closing(self, done: DoneEvent) -> list[str]:
        summary = done.summary
        out = [*self.finish(), *self._stop()]
        delta = {
            "stop_reason": stop_reason(summary, bool(self.parser.calls), self.max_tokens),
            "stop_sequence": summary.stopping_word or None,
        }
        out.append(event("message_delta", {"delta": delta, "usage": usage(summary), **response_extras(summary)}))
        out.append(event("message_stop", {}))
        return out

    def error(self, err: ApiError) -> str:
        return event("error", {"error": err.body_for("/v1/messages")["error"]})


def claude_environment(root: str, model_id: str, key: str) -> str:
    """What a Claude client needs to use this endpoint: its root URL, a key (any text when none is set) and the
    served model's name, also for the small model Claude Code uses for titles and summaries."""
    names = " ".join(f"{var}={shlex.quote(model_id)}" for var in ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"))
    return f"ANTHROPIC_BASE_URL={root} ANTHROPIC_API_KEY={shlex.quote(key or 'none')} {names}"


def install(app: FastAPI, flow: CompletionFlow) -> None:
    state = flow.state

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        chat = to_chat(await parse_body(request, MessagesRequest, state.max_body_bytes))
        options = output_options(chat)
        fmt = functools.partial(MessagesFormat, options=options, max_tokens=chat.max_tokens)
        to_body = functools.partial(message_body, options=options, max_tokens=chat.max_tokens)
        return await flow.generate(request, chat, "msg_", to_generation, fmt, to_body)

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> dict[str, int]:
        chat = to_chat(await parse_body(request, MessagesRequest, state.max_body_bytes))
        flow.check_model(chat.model)
        return {"input_tokens": await count_prompt_tokens(state, chat_to_generation(chat, sources=state.sources))}
