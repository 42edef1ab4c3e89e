"""The chat-output splitter on its own: reasoning, content and tool calls, whole and piece by piece."""

from __future__ import annotations

import json

import pytest

from app.engine.chat_format import ChatOutputParser, parse_all

NAMES = {"get_weather", "f"}


def _stream(text: str, **kw: object) -> tuple[str, str, list[tuple[str, str]]]:
    """Feed one character at a time; what the pieces add up to."""
    p = ChatOutputParser(think=True, tools=True, tool_names=NAMES, **kw)  # type: ignore[arg-type]
    pieces = [x for ch in text for x in p.push(ch)] + p.finish()
    content = "".join(x.text for x in pieces if x.kind == "content")
    reasoning = "".join(x.text for x in pieces if x.kind == "reasoning")
    calls = [(x.call.name, x.call.arguments) for x in pieces if x.call is not None]
    assert (content, reasoning) == (p.content, p.reasoning)
    return content, reasoning, calls


@pytest.mark.parametrize(
    ("text", "content", "reasoning", "calls"),
    [
        ("Hello there.", "Hello there.", "", []),
        ("<think>\nthe user greets\n</think>\n\nHello!", "Hello!", "the user greets", []),
        ("<think>\ncut short by max_tokens", "", "cut short by max_tokens", []),
        ("Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>\n", "Sure.", "",
         [("f", '{"x": 1}')]),
        ("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
         "{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}\n</tool_call>", "", "",
         [("f", "{}"), ("get_weather", '{"city": "Rome"}')]),
        ("<tool_call>\n{not json}\n</tool_call>", "<tool_call>\n{not json}\n</tool_call>", "", []),
        ("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", "", "", [("f", "{}")]),  # stopped before the tag
        ("```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```", "", "",
         [("get_weather", '{"city": "Paris"}')]),
        ("{\"name\": \"unknown_tool\", \"arguments\": {}}", "{\"name\": \"unknown_tool\", \"arguments\": {}}", "", []),
        ("```python\nprint(1)\n```", "```python\nprint(1)\n```", "", []),
        ("A <thinking> aside stays content", "A <thinking> aside stays content", "", []),
    ],
)  # fmt: skip
def test_whole_and_streamed_agree(text: str, content: str, reasoning: str, calls: list[tuple[str, str]]) -> None:
    whole = parse_all(text, think=True, tools=True, tool_names=NAMES)
    assert (whole.content, whole.reasoning, [(c.name, c.arguments) for c in whole.calls]) == (content, reasoning, calls)
    assert _stream(text) == (content, reasoning, calls)


def test_parallel_false_keeps_the_first_call_and_ids_are_unique() -> None:
    block = '<tool_call>\n{"name": "f", "arguments": {"i": %d}}\n</tool_call>\n'
    text = "".join(block % i for i in range(3))
    assert [json.loads(c.arguments)["i"] for c in parse_all(text, think=False, tools=True).calls] == [0, 1, 2]
    assert len({c.id for c in parse_all(text, think=False, tools=True).calls}) == 3
    assert len(parse_all(text, think=False, tools=True, parallel=False).calls) == 1


def test_without_tools_or_thinking_text_passes_unchanged() -> None:
    text = '<think>x</think> <tool_call>{"name": "f"}</tool_call>'
    assert parse_all(text, think=False, tools=False).content == text
