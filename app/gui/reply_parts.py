"""A reply's parts in the chat view: the answer, its thinking (collapsed, with its token count) and tool calls."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QToolButton, QVBoxLayout, QWidget

from app.engine.chat_format import ChatOutputParser, ToolCall

Segment = tuple[str, int, int]  # (text, drafted tokens, tokens), as the chat panel records a stream


@dataclass(frozen=True)
class ReplyParts:
    content: str
    reasoning: str
    reasoning_tokens: int | None  # None when the reply's token segments are not known
    calls: tuple[ToolCall, ...]
    thinking: bool  # the reply is still inside its <think> block


def split_reply(text: str, segments: Sequence[Segment] | None = None) -> ReplyParts:
    """Split a (possibly still growing) reply; with the stream's segments, count the tokens of the thinking."""
    parser = ChatOutputParser(think=True, tools=True)
    tokens: int | None = None
    if segments is not None and "".join(s[0] for s in segments) == text:
        tokens = 0
        for piece, _drafted, n in segments:
            before = parser.in_reasoning
            out = parser.push(piece)
            if before or parser.in_reasoning or any(p.kind == "reasoning" for p in out):
                tokens += n
    else:
        parser.push(text)
    thinking = parser.in_reasoning
    parser.finish()
    return ReplyParts(parser.content, parser.reasoning, tokens, tuple(parser.calls), thinking)


class ThinkingBox(QWidget):
    """ "Thinking · N tokens" under the answer; the text itself opens on a click."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.toggle = QToolButton()
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setAutoRaise(True)
        self.toggle.setStyleSheet("QToolButton { color: #666; font-size: 11px; border: none; }")
        self.toggle.toggled.connect(self._toggled)
        self.text = QLabel()  # sized to its text, so an open box takes only the room its thinking needs
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setStyleSheet("QLabel { color: #555; background: #f7f7f8; padding: 4px; }")
        self.text.setVisible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.toggle)
        lay.addWidget(self.text)
        self.setVisible(False)

    def show_parts(self, parts: ReplyParts) -> None:
        if not parts.reasoning:
            self.setVisible(False)
            return
        count = "" if parts.reasoning_tokens is None else f" · {parts.reasoning_tokens} tokens"
        self.toggle.setText(("Thinking…" if parts.thinking else "Thought") + count)
        if self.text.text() != parts.reasoning:
            self.text.setText(parts.reasoning)
        self.setVisible(True)

    def _toggled(self, on: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.text.setVisible(on)


class ToolCallsView(QLabel):
    """The reply's tool calls, each as `name(arguments)` in a code box, not as raw <tool_call> text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setVisible(False)

    def show_calls(self, calls: Sequence[ToolCall]) -> None:
        if not calls:
            self.setVisible(False)
            return
        rows = "".join(
            f"<div style='background:#eef3ea; padding:4px; margin:2px 0;'><b>{html.escape(c.name)}</b>"
            f"<code>({html.escape(c.arguments)})</code></div>"
            for c in calls
        )
        self.setText(f"<div style='color:#333;'>Tool call{'s' if len(calls) > 1 else ''}:{rows}</div>")
        self.setVisible(True)
