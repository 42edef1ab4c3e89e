"""Tool calling: OpenAI tool calls for the chat template, and the grammars of tool_choice (pure).

The `<tool_call>` syntax itself, written and parsed back, is app.engine.chat_format's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from app.engine.chat_format import CLOSE, OPEN
from app.runtime.structured import SchemaError, json_schema_rules


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
