"""OpenAI's Responses dialect: POST /v1/responses (and /input_tokens), read as a chat request, answered as items.

As with Anthropic's dialect, the request is mapped onto the chat-completions request the engine serves (input
messages, function calls and their outputs, reasoning items), and the reply's text is split by the same
ChatOutputParser into reasoning, message and function_call items. Nothing is stored: `previous_response_id` is
refused, so a client sends the whole conversation (Codex does, with `store: false`). Tools this server cannot run
(OpenAI's hosted web_search, file_search and the like) are not offered to the model, and the response says which.
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from app.engine.chat_format import OutputPiece, ToolCall
from app.engine.types import DoneEvent, GenerationSummary
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

_STRICT = ConfigDict(strict=True, extra="ignore")
_TEXT_PARTS = ("input_text", "output_text", "text", "reasoning_text", "summary_text")


# -- the request ---------------------------------------------------------------------------------------------------
class Part(BaseModel):
    model_config = _STRICT

    type: str
    text: str | None = None


class InputItem(BaseModel):
    """A message (with or without `type`), a function_call, its function_call_output, or a reasoning item."""

    model_config = _STRICT

    type: str | None = None
    role: Literal["user", "assistant", "system", "developer"] | None = None
    content: str | list[Part] | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: str | list[Part] | None = None
    summary: list[Part] | None = None


class ToolIn(BaseModel):
    """A function tool, a namespace of them, or one this server cannot run (kept only to be named)."""

    model_config = _STRICT

    type: str
    name: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    tools: list[ToolIn] | None = None  # a namespace's


class FunctionChoice(BaseModel):
    model_config = _STRICT

    type: Literal["function"]
    name: str = Field(min_length=1)


class TextFormat(BaseModel):
    model_config = _STRICT

    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")


class TextConfig(BaseModel):
    model_config = _STRICT

    format: TextFormat | None = None


class ResponsesRequest(BaseModel):
    """OpenAI's fields, plus DynaDraft's `speculative`, llama-server's `chat_template_kwargs` and `top_k`.
    `reasoning` (effort, summary), `store`, `include`, `metadata` and `prompt_cache_key` are accepted and have no
    effect: nothing is stored, and the conversation cache reuses prompts by their tokens."""

    model_config = _STRICT

    model: str = Field(min_length=1)
    input: str | list[InputItem]
    instructions: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    tools: list[ToolIn] | None = None
    tool_choice: Literal["auto", "none", "required"] | FunctionChoice | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    stream: bool = False
    previous_response_id: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    speculative: SpeculativeOptions | None = None


def _text(parts: str | list[Part] | None, param: str) -> str:
    if parts is None or isinstance(parts, str):
        return parts or ""
    for j, p in enumerate(parts):
        if p.type not in _TEXT_PARTS or p.text is None:
            what = "images and files are not supported" if p.type in ("input_image", "input_file") else "not supported"
            raise unsupported(f"{param}.{j}.type", f"a content part of type {p.type!r}: {what}")
    return "".join(p.text or "" for p in parts)


def _messages(req: ResponsesRequest) -> list[ChatMessage]:
    """The input items as chat messages: function calls join the assistant turn they follow, reasoning goes to the
    assistant turn after it, and each function_call_output becomes a `tool` message."""
    out: list[ChatMessage] = [] if req.instructions is None else [ChatMessage(role="system", content=req.instructions)]
    if isinstance(req.input, str):
        return [*out, ChatMessage(role="user", content=req.input)]
    reasoning: list[str] = []

    def assistant() -> ChatMessage:
        # the open assistant turn (the last message, if it is one without a tool result after it), else a new one
        if not (out and out[-1].role == "assistant"):
            out.append(ChatMessage(role="assistant", content=""))
        msg = out[-1]
        if reasoning:
            msg.reasoning_content = (msg.reasoning_content or "") + "".join(reasoning)
            reasoning.clear()
        return msg

    for i, item in enumerate(req.input):
        param = f"input.{i}"
        kind = item.type or ("message" if item.role else None)
        if kind == "message":
            if item.role is None:
                raise ApiError(400, f"{param}.role is required", code="invalid_request", param=f"{param}.role")
            text = _text(item.content, f"{param}.content")
            if item.role == "assistant":
                msg = assistant()
                msg.content = f"{msg.content or ''}{text}"
            else:
                out.append(ChatMessage(role=item.role, content=text))
        elif kind == "function_call":
            if not item.call_id or not item.name:
                raise ApiError(
                    400, f"{param}: a function_call needs call_id and name", code="invalid_request", param=param
                )
            call = ToolCallIn(id=item.call_id, function=FunctionCall(name=item.name, arguments=item.arguments or "{}"))
            msg = assistant()
            msg.tool_calls = [*(msg.tool_calls or []), call]
        elif kind == "function_call_output":
            if not item.call_id:
                raise ApiError(400, f"{param}.call_id is required", code="invalid_request", param=f"{param}.call_id")
            out.append(
                ChatMessage(role="tool", tool_call_id=item.call_id, content=_text(item.output, f"{param}.output"))
            )
        elif kind == "reasoning":
            # the model's own reasoning text if given, else its summary (OpenAI's models send only that)
            reasoning.append(_text(item.content, f"{param}.content") or _text(item.summary, f"{param}.summary"))
        else:
            raise unsupported(f"{param}.type", f"input items of type {kind!r} are not supported")
    return out


def _tools(req: ResponsesRequest) -> tuple[list[Tool] | None, dict[str, str], list[str]]:
    """(the function tools, as chat tools; the namespace of each tool offered from one; the tools not offered
    because this server cannot run them). A namespace's functions are offered by their own names, and a call to
    one comes back with its `namespace`, as OpenAI's function_call items carry it."""
    offered: list[Tool] = []
    namespaces: dict[str, str] = {}
    left_out: list[str] = []

    def offer(t: ToolIn, param: str, namespace: str | None) -> None:
        if t.type == "namespace" and namespace is None and t.name:
            for j, inner in enumerate(t.tools or ()):
                offer(inner, f"{param}.tools.{j}", t.name)
            return
        if t.type != "function":
            left_out.append(t.type if not t.name else f"{t.type}:{t.name}")
            return
        if t.name is None:
            raise ApiError(400, f"{param}.name is required", code="invalid_request", param=f"{param}.name")
        fn = FunctionDef(name=t.name, description=t.description, parameters=t.parameters, strict=t.strict)
        offered.append(Tool(type="function", function=fn))
        if namespace is not None:
            namespaces[t.name] = namespace

    for i, t in enumerate(req.tools or ()):
        offer(t, f"tools.{i}", None)
    return offered or None, namespaces, left_out


def _response_format(text: TextConfig | None) -> ResponseFormat | None:
    if text is None or text.format is None or text.format.type == "text":
        return None
    if text.format.type == "json_object":
        return ResponseFormat(type="json_object")
    return ResponseFormat.for_schema(text.format.schema_, text.format.name or "output")


@dataclass(frozen=True)
class Mapped:
    """A Responses request as the chat request it means, what the response echoes of it, and the namespace of
    each tool offered from one."""

    chat: ChatCompletionRequest
    echo: dict[str, Any]
    namespaces: dict[str, str]


def to_chat(req: ResponsesRequest) -> Mapped:
    if req.previous_response_id is not None:
        msg = "this server stores no responses: send the whole conversation as input (and store: false)"
        raise unsupported("previous_response_id", msg)
    messages = _messages(req)
    if not messages:
        raise ApiError(400, "input must not be empty", code="invalid_request", param="input")
    tools, namespaces, left_out = _tools(req)
    choice: Literal["auto", "none", "required"] | NamedToolChoice | None
    if isinstance(req.tool_choice, FunctionChoice):
        if not any(t.function.name == req.tool_choice.name for t in tools or ()):
            msg = f"tool_choice names {req.tool_choice.name!r}, which is not among the function tools"
            raise ApiError(400, msg, code="invalid_request", param="tool_choice.name")
        choice = NamedToolChoice(type="function", function=NamedFunction(name=req.tool_choice.name))
    else:
        choice = req.tool_choice
    chat = ChatCompletionRequest(
        model=req.model,
        messages=messages,
        max_tokens=req.max_output_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=req.top_k,
        stream=req.stream,
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=req.parallel_tool_calls,
        response_format=_response_format(req.text),
        chat_template_kwargs=req.chat_template_kwargs,
        speculative=req.speculative,
    )
    echo = {
        "instructions": req.instructions,
        "max_output_tokens": req.max_output_tokens,
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "tool_choice": req.tool_choice.model_dump()
        if isinstance(req.tool_choice, FunctionChoice)
        else req.tool_choice or "auto",
        "tools": [t.model_dump(exclude_none=True) for t in req.tools or () if t.type == "function"],
        "text": {"format": {"type": "text"}}
        if req.text is None
        else req.text.model_dump(by_alias=True, exclude_none=True),
        "store": False,
        "tools_not_offered": left_out,  # DynaDraft's: tools the request sent that this server cannot run
    }
    return Mapped(chat, echo, namespaces)


# -- the response --------------------------------------------------------------------------------------------------
def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _message(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def _reasoning(item_id: str, text: str) -> dict[str, Any]:
    content = [{"type": "reasoning_text", "text": text}] if text else []
    return {"type": "reasoning", "id": item_id, "summary": [], "content": content}


def _call(item_id: str, call: ToolCall, status: str, namespaces: dict[str, str]) -> dict[str, Any]:
    arguments = call.arguments if status == "completed" else ""
    item = {"type": "function_call", "id": item_id, "call_id": call.id, "name": call.name, "arguments": arguments}
    if call.name in namespaces:
        item["namespace"] = namespaces[call.name]
    return {**item, "status": status}


def usage(summary: GenerationSummary) -> dict[str, Any]:
    out = len(summary.tokens)
    return {
        "input_tokens": summary.prompt_tokens,
        "input_tokens_details": {"cached_tokens": summary.timings.cache_n},
        "output_tokens": out,
        **(
            {"output_tokens_details": {"reasoning_tokens": summary.reasoning["reasoning_tokens"]}}
            if summary.reasoning is not None
            else {}
        ),
        "total_tokens": summary.prompt_tokens + out,
    }


def response_object(
    rid: str,
    created: int,
    model: str,
    echo: dict[str, Any],
    output: list[dict[str, Any]],
    summary: GenerationSummary | None,
) -> dict[str, Any]:
    """The Response: in progress (no summary yet) or finished, `incomplete` when max_output_tokens ended it."""
    status = "in_progress"
    incomplete = None
    if summary is not None:
        status = "incomplete" if summary.finish_reason == "length" else "completed"
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    body = {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "model": model,
        "output": output,
        **echo,
    }
    if summary is not None:
        body |= {"usage": usage(summary), **response_extras(summary)}
    return body


def response_body(
    summary: GenerationSummary, options: OutputOptions, mapped: Mapped, *, id: str, created: int, model: str
) -> dict[str, Any]:
    out = options.parse(summary.text)
    items: list[dict[str, Any]] = []
    if out.reasoning:
        items.append(_reasoning(_id("rs"), out.reasoning))
    if out.content or not out.calls:
        items.append(_message(_id("msg"), out.content, "completed"))
    items += [_call(_id("fc"), c, "completed", mapped.namespaces) for c in out.calls]
    return response_object(id, created, model, mapped.echo, items, summary)


@dataclass
class ResponsesFormat(PieceStream):
    """OpenAI's Responses stream: response.created, each output item added, filled by deltas and done in turn, then
    response.completed (or response.incomplete) with the whole Response; every event numbered; no [DONE]."""

    done_line = ""
    mapped: Mapped | None = None
    _items: list[dict[str, Any]] = field(default_factory=list, init=False)  # the output so far (the last may be open)
    _open: str | None = field(default=None, init=False)
    _text: str = field(default="", init=False)
    _seq: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        assert self.mapped is not None
        self.echo, self.namespaces = self.mapped.echo, self.mapped.namespaces

    def _event(self, kind: str, /, **data: Any) -> str:
        payload = {"type": kind, "sequence_number": self._seq, **data}
        self._seq += 1
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n"

    def _response(self, summary: GenerationSummary | None) -> dict[str, Any]:
        output = self._items if summary is not None else []
        return response_object(self.id, self.created, self.model, self.echo, output, summary)

    def opening(self) -> list[str]:
        snapshot = self._response(None)
        return [
            self._event("response.created", response=snapshot),
            self._event("response.in_progress", response=snapshot),
        ]

    def _add(self, item: dict[str, Any]) -> list[str]:
        out = self._close()
        self._items.append(item)
        self._open = item["type"]
        self._text = ""
        out.append(self._event("response.output_item.added", output_index=len(self._items) - 1, item=item))
        return out

    def _close(self) -> list[str]:
        if self._open is None:
            return []
        index = len(self._items) - 1
        item = self._items[index]
        ids = {"item_id": item["id"], "output_index": index}
        out = []
        if self._open == "message":
            part = {"type": "output_text", "text": self._text, "annotations": []}
            out.append(self._event("response.output_text.done", **ids, content_index=0, text=self._text, logprobs=[]))
            out.append(self._event("response.content_part.done", **ids, content_index=0, part=part))
            item = _message(item["id"], self._text, "completed")
        elif self._open == "reasoning":
            out.append(self._event("response.reasoning_text.done", **ids, content_index=0, text=self._text))
            item = _reasoning(item["id"], self._text)
        self._items[index] = item
        self._open = None
        return [*out, self._event("response.output_item.done", output_index=index, item=item)]

    def pieces(self, pieces: list[OutputPiece]) -> list[str]:
        out: list[str] = []
        for p in pieces:
            if p.call is not None:
                item_id = _id("fc")
                out += self._add(_call(item_id, p.call, "in_progress", self.namespaces))
                index = len(self._items) - 1
                ids = {"item_id": item_id, "output_index": index}
                out.append(self._event("response.function_call_arguments.delta", **ids, delta=p.call.arguments))
                out.append(
                    self._event(
                        "response.function_call_arguments.done", **ids, arguments=p.call.arguments, name=p.call.name
                    )
                )
                self._items[index] = _call(item_id, p.call, "completed", self.namespaces)
                self._open = None
                out.append(self._event("response.output_item.done", output_index=index, item=self._items[index]))
            elif p.kind == "reasoning" and p.text:
                if self._open != "reasoning":
                    out += self._add({"type": "reasoning", "id": _id("rs"), "summary": [], "content": []})
                out.append(self._delta("response.reasoning_text.delta", p.text))
            elif p.text:
                if self._open != "message":
                    out += self._add(_message(_id("msg"), "", "in_progress"))
                    part = {"type": "output_text", "text": "", "annotations": []}
                    ids = {"item_id": self._items[-1]["id"], "output_index": len(self._items) - 1}
                    out.append(self._event("response.content_part.added", **ids, content_index=0, part=part))
                out.append(self._delta("response.output_text.delta", p.text, logprobs=[]))
        return out

    def _delta(self, name: str, text: str, **extra: Any) -> str:
        self._text += text
        ids = {"item_id": self._items[-1]["id"], "output_index": len(self._items) - 1}
        return self._event(name, **ids, content_index=0, delta=text, **extra)

    def closing(self, done: DoneEvent) -> list[str]:
        out = [*self.finish(), *self._close()]
        if not self._items:  # nothing was generated: still one (empty) message, as the body has
            out += self._add(_message(_id("msg"), "", "in_progress"))
            out += self._close()
        final = self._response(done.summary)
        name = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return [*out, self._event(name, response=final)]

    def error(self, err: ApiError) -> str:
        return self._event("error", code=err.code, message=err.message, param=err.param)


def install(app: FastAPI, flow: CompletionFlow) -> None:
    state = flow.state

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        mapped = to_chat(await parse_body(request, ResponsesRequest, state.max_body_bytes))
        options = output_options(mapped.chat)
        fmt = functools.partial(ResponsesFormat, options=options, mapped=mapped)
        to_body = functools.partial(response_body, options=options, mapped=mapped)
        return await flow.generate(request, mapped.chat, "resp_", chat_to_generation, fmt, to_body)

    @app.post("/v1/responses/input_tokens")
    async def input_tokens(request: Request) -> dict[str, Any]:
        mapped = to_chat(await parse_body(request, ResponsesRequest, state.max_body_bytes))
        flow.check_model(mapped.chat.model)
        gen = chat_to_generation(mapped.chat, sources=state.sources)
        return {"object": "response.input_tokens", "input_tokens": await count_prompt_tokens(state, gen)}
