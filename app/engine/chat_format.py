"""The chat output format, below the server and the GUI: tool-call syntax both ways, and the reasoning split.

Tool calls: Qwen2.5 / Hermes-style templates describe the tools in the system turn and ask the model to answer with
`<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` blocks. `tools_instruction` and `render_call` write
that syntax (for templates that cannot show tools themselves, app.engine.chat); `parse_call` and `parse_bare_calls`
read it back.

Reasoning is a `<think>...</think>` block at the start of the output (Qwen3, DeepSeek-R1 style). `ChatOutputParser`
splits generated chat text into reasoning, content and tool calls as it streams (pure, incremental): a tag split
across pieces is held back until it is complete; a block that does not parse as a call is released as plain
content, unchanged.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

OPEN = "<tool_call>"
CLOSE = "</tool_call>"


def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, **kw: Any) -> str:
    # Templates print tool schemas and call arguments with `tojson`, meaning plain JSON (as transformers and
    # llama.cpp render it); Jinja's own filter HTML-escapes <, > and & and would show the model other text.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, **kw)


# -- tool calls: writing them ---------------------------------------------------------------------------------------
def tools_instruction(tools: Sequence[Mapping[str, Any]]) -> str:
    """How to call `tools`, for a template that cannot show them itself (the syntax `parse_call` reads back)."""
    listed = "\n".join(tojson(t) for t in tools)
    return (
        "You may call functions to answer. To call one, reply with only\n"
        + OPEN
        + '\n{"name": "<function name>", "arguments": {<arguments as JSON>}}\n'
        + CLOSE
        + f"\nThe functions:\n{listed}"
    )


def render_call(name: Any, arguments: Any) -> str:
    """One call as the model was asked to write it (a call in the history, for a template without tools)."""
    body = tojson({"name": name, "arguments": arguments})
    return f"{OPEN}\n{body}\n{CLOSE}"


# -- tool calls: reading them back ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolCall:
    """One parsed call: the function's name and its arguments as a JSON text (OpenAI's wire form)."""

    id: str
    name: str
    arguments: str


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_call(body: str) -> ToolCall | None:
    """The JSON between the tags as a call, or None when it is not one (then the text stays plain content)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None
    args = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(new_call_id(), data["name"], json.dumps(args, ensure_ascii=False))


_FENCE = re.compile(r"^```(?:json)?\s*\n(.*?)\n?```$", re.DOTALL)


def parse_bare_calls(text: str, names: Collection[str]) -> list[ToolCall] | None:
    """A whole answer that is only a call, or a list of calls, as JSON (optionally in a ```json fence): what
    Qwen2.5-Coder writes instead of <tool_call> tags. Only names of the request's tools count, so ordinary JSON
    answers stay content."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith(("{", "[")):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    items = data if isinstance(data, list) else [data]
    calls = []
    for item in items:
        call = parse_call(json.dumps(item)) if isinstance(item, dict) and item.get("name") in names else None
        if call is None:
            return None
        calls.append(call)
    return calls or None


# -- the reasoning split and the streaming parser -------------------------------------------------------------------
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


@dataclass(frozen=True)
class OutputPiece:
    kind: Literal["content", "reasoning", "tool_call"]
    text: str = ""
    call: ToolCall | None = None


def _partial_tag(buf: str, tags: Sequence[str]) -> int:
    """Length of the longest suffix of `buf` that is a proper prefix of one of `tags`."""
    best = 0
    for tag in tags:
        for k in range(min(len(tag) - 1, len(buf)), best, -1):
            if buf.endswith(tag[:k]):
                best = k
                break
    return best


class ChatOutputParser:
    """Feed generated text with `push`, then call `finish`; each returns the pieces that are certain now."""

    def __init__(self, *, think: bool, tools: bool, parallel: bool = True, tool_names: Collection[str] = ()) -> None:
        self.think = think
        self.tools = tools
        self.parallel = parallel
        self.tool_names = frozenset(tool_names)
        self._buf = ""
        self._mode: Literal["start", "content", "reasoning", "tool", "bare"] = "start"
        self._answered = False  # content or a call was released: a bare-JSON call can no longer start
        self._strip_lead = False  # drop whitespace that only separated a block from the content after it
        self._ws = ""  # trailing whitespace of the content, held while a tool call may follow
        self._rws = ""  # trailing newlines of the reasoning, held while the closing tag may follow
        self.content = ""
        self.reasoning = ""
        self.calls: list[ToolCall] = []

    @property
    def in_reasoning(self) -> bool:
        return self._mode == "reasoning"

    def push(self, text: str) -> list[OutputPiece]:
        self._buf += text
        out: list[OutputPiece] = []
        while self._step(out):
            pass
        return out

    def finish(self) -> list[OutputPiece]:
        out: list[OutputPiece] = []
        buf, self._buf = self._buf, ""
        if self._mode == "bare":
            calls = parse_bare_calls(buf, self.tool_names)
            if calls is not None:
                for call in calls:
                    self._call(call, out)
                return out
            self._mode = "content"  # not a call: read the held text as ordinary output
            self._answered = True
            self._buf = buf
            while self._step(out):
                pass
            buf, self._buf = self._buf, ""
        if self._mode == "tool":
            cut = parse_call(buf.strip())  # a call cut short of its closing tag (end of generation)
            if cut is not None:
                self._call(cut, out)
            else:
                self._content(OPEN + buf, out, final=True)
        elif self._mode == "reasoning":
            self._reasoning(buf, out)
        else:
            self._content(buf, out, final=True)
        return out

    # -- the state machine ----------------------------------------------------------------------------------------
    def _step(self, out: list[OutputPiece]) -> bool:
        """Consume what can be decided in the buffer; True when the mode changed (look again)."""
        buf = self._buf
        if self._mode == "start":
            if not self.think:
                self._mode = "content"
                return True
            lead = buf.lstrip()
            if lead.startswith(THINK_OPEN):
                self._buf = lead[len(THINK_OPEN) :]
                self._mode = "reasoning"
                return True
            if not lead or THINK_OPEN.startswith(lead):
                return False  # could still be the opening tag
            self._mode = "content"
            return True
        if self._mode == "reasoning":
            i = buf.find(THINK_CLOSE)
            if i == -1:
                keep = _partial_tag(buf, (THINK_CLOSE,))
                self._reasoning(buf[: len(buf) - keep], out)
                self._buf = buf[len(buf) - keep :]
                return False
            self._reasoning(buf[:i], out)
            self._rws = ""
            self._buf = buf[i + len(THINK_CLOSE) :]
            self._mode = "content"
            self._strip_lead = True
            return True
        if self._mode == "tool":
            i = buf.find(CLOSE)
            if i == -1:
                return False
            body = buf[:i]
            self._buf = buf[i + len(CLOSE) :]
            self._mode = "content"
            call = parse_call(body.strip())
            if call is None:
                self._content(OPEN + body + CLOSE, out)
            else:
                self._call(call, out)
            return True
        if self._mode == "bare":
            return False  # held to the end: the whole answer is a call or it is content
        # content
        if self.tools and self.tool_names and not self._answered:
            lead = buf.lstrip()
            if lead.startswith(("{", "[", "```")):
                self._mode = "bare"
                return True
            if not lead or "```".startswith(lead):
                return False
        i = buf.find(OPEN) if self.tools else -1
        if i == -1:
            keep = _partial_tag(buf, (OPEN,)) if self.tools else 0
            self._content(buf[: len(buf) - keep], out)
            self._buf = buf[len(buf) - keep :]
            return False
        self._content(buf[:i], out)
        self._buf = buf[i + len(OPEN) :]
        self._mode = "tool"
        return True

    def _reasoning(self, text: str, out: list[OutputPiece]) -> None:
        # Newlines that only frame the block ("<think>\n ... \n</think>") are not reasoning: hold trailing ones until
        # more text shows they were inside it.
        if not self.reasoning:
            text = text.lstrip("\n")
        text = self._rws + text
        kept = text.rstrip("\n")
        self._rws = text[len(kept) :]
        if kept:
            self.reasoning += kept
            out.append(OutputPiece("reasoning", kept))

    def _call(self, call: ToolCall, out: list[OutputPiece]) -> None:
        self._answered = True
        self._strip_lead = True
        self._ws = ""
        if self.calls and not self.parallel:
            return  # parallel_tool_calls=false: the first call is the answer
        self.calls.append(call)
        out.append(OutputPiece("tool_call", call=call))

    def _content(self, text: str, out: list[OutputPiece], final: bool = False) -> None:
        if self._strip_lead:
            text = text.lstrip()
            if not text:
                return
            self._strip_lead = False
        text = self._ws + text
        self._ws = ""
        if self.tools and not final:
            stripped = text.rstrip()
            self._ws = text[len(stripped) :]
            text = stripped
        elif self.tools:
            text = text.rstrip() if self.calls else text
        if text:
            self._answered = True
            self.content += text
            out.append(OutputPiece("content", text))


def parse_all(
    text: str, *, think: bool, tools: bool, parallel: bool = True, tool_names: Collection[str] = ()
) -> ChatOutputParser:
    """The whole output at once (non-streaming responses): read .content, .reasoning and .calls."""
    parser = ChatOutputParser(think=think, tools=tools, parallel=parallel, tool_names=tool_names)
    parser.push(text)
    parser.finish()
    return parser
