"""Tool calling: OpenAI tools for the chat template, the grammars of tool_choice, and parsing calls back (pure).

Qwen2.5 / Hermes-style templates describe the tools in the system turn and ask the model to answer with
`<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` blocks; that is the syntax parsed back here.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.server.structured import SchemaError, json_schema_rules

OPEN = "<tool_call>"
CLOSE = "</tool_call>"


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


def template_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """An assistant message with tool_calls as templates read it: arguments as an object, not a JSON string."""
    out = dict(message)
    calls = []
    for call in message.get("tool_calls") or ():
        call = dict(call)
        fn = dict(call.get("function") or {})
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                fn["arguments"] = json.loads(args)
            except ValueError:
                pass  # not JSON: the template prints the text as the client sent it
        call["function"] = fn
        calls.append(call)
    if calls:
        out["tool_calls"] = calls
    return out


def _call_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    fn = tool["function"]
    params = fn.get("parameters") or {"type": "object"}
    return {
        "type": "object",
        "properties": {"name": {"const": fn["name"]}, "arguments": params},
        "required": ["name", "arguments"],
    }


def tool_choice_grammar(tools: Sequence[Mapping[str, Any]], name: str | None, parallel: bool) -> str:
    """GBNF for tool_choice "required" (any of `tools`) or a named function: one call, or several if `parallel`.

    Raises SchemaError when a tool's `parameters` schema cannot be turned into a grammar.
    """
    chosen = [t for t in tools if name is None or t["function"]["name"] == name]
    schema: dict[str, Any] = (
        {"anyOf": [_call_schema(t) for t in chosen]} if len(chosen) > 1 else _call_schema(chosen[0])
    )
    try:
        rules = json_schema_rules(schema, "call")
    except SchemaError as e:
        raise SchemaError(f"tools: {e}") from None
    block = f'"{OPEN}\\n" call "\\n{CLOSE}"'
    root = f'root ::= {block} ("\\n" {block})*' if parallel else f"root ::= {block}"
    return f"{root}\n{rules}"
