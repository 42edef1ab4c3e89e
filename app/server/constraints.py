"""Which grammar a request asks for: response_format, tool_choice, or llama.cpp's grammar / json_schema fields."""

from __future__ import annotations

from typing import Any

from app.runtime.structured import JSON_OBJECT_SCHEMA, SchemaError, json_schema_grammar
from app.server import tools as tool_syntax
from app.server.errors import ApiError
from app.server.schemas import ChatCompletionRequest, CompletionRequest


def schema_grammar(schema: Any, param: str) -> str:
    try:
        return json_schema_grammar(schema)
    except SchemaError as e:
        raise ApiError(400, f"{param}: invalid JSON schema: {e}", code="invalid_schema", param=param) from None


def _response_format_grammar(req: ChatCompletionRequest) -> str | None:
    fmt = req.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return schema_grammar(fmt.schema_ or JSON_OBJECT_SCHEMA, "response_format.schema")
    if fmt.type == "json_schema":
        if fmt.json_schema is None or fmt.json_schema.schema_ is None:
            msg = "response_format json_schema needs json_schema.schema (the JSON schema itself)"
            raise ApiError(400, msg, code="invalid_request", param="response_format.json_schema")
        return schema_grammar(fmt.json_schema.schema_, "response_format.json_schema.schema")
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


def _only_one(found: dict[str, str | None]) -> str | None:
    given = {k: v for k, v in found.items() if v is not None}
    if len(given) > 1:
        names = sorted(given)
        msg = f"{' and '.join(names)} each constrain the output: give only one"
        raise ApiError(400, msg, code="invalid_request", param=names[1])
    return next(iter(given.values()), None)


def chat_grammar(req: ChatCompletionRequest) -> str | None:
    """The one grammar a chat request asks for (response_format, tool_choice, grammar or json_schema)."""
    found = {"response_format": _response_format_grammar(req), "tool_choice": _tool_choice_grammar(req)}
    return _only_one(found | raw_grammars(req))


def completion_grammar(req: CompletionRequest) -> str | None:
    """The grammar a text completion asks for (llama.cpp's grammar or json_schema field)."""
    return _only_one(raw_grammars(req))


def raw_grammars(req: ChatCompletionRequest | CompletionRequest) -> dict[str, str | None]:
    """llama.cpp's own fields: `grammar` (GBNF, checked by llama.cpp when the request runs) and `json_schema`."""
    if req.grammar is not None and not req.grammar.strip():
        raise ApiError(400, "grammar must not be empty", code="invalid_request", param="grammar")
    schema = None if req.json_schema is None else schema_grammar(req.json_schema, "json_schema")
    return {"grammar": req.grammar, "json_schema": schema}
