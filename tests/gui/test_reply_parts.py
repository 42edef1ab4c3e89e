"""Thinking and tool calls in the chat view: split from the answer, thinking collapsed with its own token count."""

from __future__ import annotations

import re
from pathlib import Path

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
    assert box.text.isVisible() and box.text.text() == "The user asks about the sea."
    box.show_parts(split_reply("plain answer", [("plain answer", 0, 2)]))
    assert not box.isVisible()
    calls = ToolCallsView()
    qtbot.addWidget(calls)
    calls.show_calls(split_reply('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>').calls)
    assert "f" in calls.text() and "Tool call" in calls.text()


THINK_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}"
)
SHOTS = Path("/work/brief/shots")


def test_a_thinking_reply_in_the_app(make_window, qtbot, smollm2_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real reply under a template that opens <think>: the app shows it as thinking, collapsed, with its count."""
    from app.engine.config import EngineConfig
    from app.engine.worker import Engine
    from app.gui.main import MainWindow

    config = EngineConfig(model=str(smollm2_path), n_ctx=2048, n_threads=1, chat_template=THINK_TEMPLATE)
    with Engine(config).wait_ready(120) as engine:
        w: MainWindow = make_window(engine=engine, model_label="SmolLM2-135M (thinking template)")
        w.chat.new_conversation()
        w.chat.apply_settings("", {"temperature": 0.0, "max_tokens": 24, "spec_mode": "off"})
        conv = w.chat.conv
        assert conv is not None
        # An earlier turn, as a reasoning model answers: thinking, then a tool call and the answer.
        w.chat.store.add_message(conv.id, "user", "What is the weather in Paris?")
        earlier = (
            "<think>\nThe user wants the weather; I should call the tool.\n</think>\n\nLet me check.\n"
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
        )
        w.chat.store.add_message(conv.id, "assistant", earlier, {"segments": [[earlier, 0, 31]]})
        w.chat.open_conversation(conv.id)
        with qtbot.waitSignal(w.chat.reply_finished, timeout=180_000) as blocker:
            assert w.chat.send("Is the sea blue?")
        saved = blocker.args[0]
        assert saved is not None and saved.content.startswith("<think>\n")
        old, new = w.chat.bubbles()[1], w.chat.bubbles()[-1]
        assert old.thinking.isVisible() and old.thinking.toggle.text() == "Thought · 31 tokens"
        assert old.tool_calls.isVisible() and "get_weather" in old.tool_calls.text()
        assert "<tool_call>" not in old.body.toPlainText() and "Let me check." in old.body.toPlainText()
        # The new reply started inside the block the template opened; its thinking is counted token by token (the
        # model may close it and answer, as the earlier turn shows, or think until max_tokens).
        assert new.thinking.isVisible() and not new.thinking.text.isVisible()
        label = re.fullmatch(r"(Thought|Thinking…) · (\d+) tokens", new.thinking.toggle.text())
        assert label, new.thinking.toggle.text()
        closed = "</think>" in saved.content
        assert label.group(1) == ("Thought" if closed else "Thinking…")
        n = int(label.group(2))
        assert 0 < n <= saved.stats["tokens"] and (closed or n == saved.stats["tokens"])
        assert "<think>" not in new.body.toPlainText()
        old.thinking.toggle.click()
        assert old.thinking.text.isVisible()
        if SHOTS.is_dir():
            w.resize(1100, 760)
            qtbot.wait(200)
            w.grab().save(str(SHOTS / "agents-thinking.png"))
