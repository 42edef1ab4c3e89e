"""Structured output: JSON schemas and `json_object` as GBNF grammars (llama-cpp-python's converter), pure."""

from __future__ import annotations

import json
from typing import Any

from llama_cpp.llama_grammar import SchemaConverter

# Any JSON object (OpenAI's `json_object`): the converter's own rule for an unconstrained object.
JSON_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}


class SchemaError(ValueError):
    """A JSON schema the converter cannot turn into a grammar; the message says why."""


def json_schema_rules(schema: Any, name: str = "") -> str:
    """GBNF rules that accept exactly the JSON documents `schema` describes; the entry rule is `name` ("" = root).

    Remote $refs are never fetched.
    """
    if not isinstance(schema, dict):
        raise SchemaError(f"a JSON schema must be an object, got {type(schema).__name__}")
    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    try:
        # The converter edits $ref strings in place: give it a copy so the request stays as the client sent it.
        resolved = converter.resolve_refs(json.loads(json.dumps(schema)), "input")
        converter.visit(resolved, name)
        return str(converter.format_grammar())
    except RecursionError:
        raise SchemaError("the schema nests too deeply") from None
    except Exception as e:  # the converter asserts/raises on what it does not support; its message says what
        raise SchemaError(str(e) or type(e).__name__) from None


def json_schema_grammar(schema: Any) -> str:
    return json_schema_rules(schema, "")
