"""Thinking and tool calls in the chat view: split from the answer, thinking collapsed with its own token count."""

from __future__ import annotations

from app.gui.reply_parts import ThinkingBox, ToolCallsView, split_reply

REPLY = [
    ("<think>\n", 0, 0),  # the tag the engine repeats when the template opened the block
    ("The user", 0, 2),
    (" asks about", 1, 2),
    (" the sea.\n</think>", 0, 3),
    ("\n\nIt is", 0, 2),
    (" blue.", 0, 2),
]


def test_split_counts_the_thinking_tokens() -> None:
    text = "".join(s[0] for s in REPLY)
    parts = split_reply(text, REPLY)
    assert parts.reasoning == "The user asks about the sea."
    assert parts.content == "It is blue."
    assert parts.reasoning_tokens == 7 and not parts.thinking and not parts.calls
    growing = split_reply("".join(s[0] for s in REPLY[:3]), REPLY[:3])
    assert growing.thinking and growing.content == "" and growing.reasoning_tokens == 4
    assert split_reply(text).reasoning_tokens is None  # no segments (an old message): no count


def test_tool_calls_are_split_out() -> None:
    parts = split_reply(
        'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    )
    assert parts.content == "Let me look."
    assert [(c.name, c.arguments) for c in parts.calls] == [("get_weather", '{"city": "Paris"}')]


def test_thinking_box_is_collapsed_with_its_count(qtbot) -> None:  # type: ignore[no-untyped-def]
    box = ThinkingBox()
    qtbot.addWidget(box)
    box.show()
    text = "".join(s[0] for s in REPLY)
    box.show_parts(split_reply(text, REPLY))
    assert box.isVisible() and box.toggle.text() == "Thought · 7 tokens"
    assert not box.text.isVisible()
    box.toggle.click()
    assert box.text.isVisible() and box.text.toPlainText() == "The user asks about the sea."
    box.show_parts(split_reply("plain answer", [("plain answer", 0, 2)]))
    assert not box.isVisible()
    calls = ToolCallsView()
    qtbot.addWidget(calls)
    calls.show_calls(split_reply('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>').calls)
    assert "f" in calls.text() and "Tool call" in calls.text()
