"""One message bubble: the Markdown (or draft-highlighted) body, its stats footer, Copy / Edit / Regenerate and its
`‹ i/n ›` version switch."""

from __future__ import annotations

import html
import math
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QTextBlockFormat, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.gui.chat_request import format_stats
from app.gui.reply_parts import ReplyParts, Segment, ThinkingBox, ToolCallsView, split_reply
from app.gui.store import Message

_CODE_BG = QColor("#f3f3f3")


class MarkdownView(QTextBrowser):
    """A read-only text view that grows to fit its document, so a column of them scrolls as one transcript."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenExternalLinks(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().setDocumentMargin(6)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.setStyleSheet("QTextBrowser { background: transparent; }")
        self._fit()

    def _fit(self, *_: object) -> None:
        h = math.ceil(self.document().size().height()) + 2 * self.frameWidth() + 2
        if h != self.height():
            self.setFixedHeight(max(h, 24))

    def wheelEvent(self, e: Any) -> None:  # noqa: N802 - Qt API
        e.ignore()  # let the transcript's scroll area scroll, not this (non-scrolling) view

    def render_markdown(self, text: str) -> None:
        self.setMarkdown(text)
        self._shade_code_blocks()

    def render_highlighted(self, segments: list[tuple[str, int, int]]) -> None:
        """Plain text with the pieces that came from accepted drafts shaded (darker = more drafted tokens)."""
        out = []
        for text, drafted, n in segments:
            piece = html.escape(text)
            if drafted > 0 and n > 0:
                alpha = 0.25 + 0.5 * min(1.0, drafted / n)
                piece = f'<span style="background-color: rgba(46,160,67,{alpha:.2f})">{piece}</span>'
            out.append(piece)
        self.setHtml(f'<div style="white-space: pre-wrap">{"".join(out)}</div>')

    def _shade_code_blocks(self) -> None:
        # The Markdown importer marks fenced/indented code with NonBreakableLines (and a fixed font) but no
        # background; shading those blocks makes code stand out the way users expect from chat apps.
        doc = self.document()
        block = doc.begin()
        fmt = QTextBlockFormat()
        fmt.setBackground(_CODE_BG)
        while block.isValid():
            if block.blockFormat().nonBreakableLines():
                cur = QTextCursor(block)
                cur.mergeBlockFormat(fmt)
            block = block.next()


def settled_boundary(text: str, start: int) -> int:
    """Where the settled part of a growing Markdown text ends: after the last blank line at or past `start` that
    is outside a code fence (what comes before it can no longer change how it renders); `start` if none."""
    end = len(text)
    while (i := text.rfind("\n\n", start, end)) >= start:
        if ("\n" + text[:i]).count("\n```") % 2 == 0:
            return i + 2
        end = i
    return start


class StreamingBody(QWidget):
    """A reply's body while it streams: settled paragraphs, each rendered once, above a live tail re-rendered on
    every tick, so a tick costs the length of the last paragraph rather than of the whole message."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        self._lay.setSpacing(0)
        self.tail = MarkdownView()
        self._lay.addWidget(self.tail)
        self.settled_len = 0
        self.chunks = 0

    def update_text(self, text: str) -> None:
        cut = settled_boundary(text, self.settled_len)
        if cut > self.settled_len:
            chunk = MarkdownView()
            chunk.render_markdown(text[self.settled_len : cut])
            self._lay.insertWidget(self._lay.count() - 1, chunk)
            self.settled_len = cut
            self.chunks += 1
        self.tail.render_markdown(text[self.settled_len :] or "…")


class BranchSwitch(QWidget):
    """`‹ i/n ›`: which version of a message this is, and arrows to the previous and next one (LM Studio, ChatGPT)."""

    stepped = Signal(int)  # -1 previous, +1 next

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.prev_btn = QToolButton()
        self.prev_btn.setText("‹")
        self.prev_btn.setToolTip("Previous version")
        self.prev_btn.clicked.connect(lambda: self.stepped.emit(-1))
        self.label = QLabel("")
        self.label.setStyleSheet("color: #555;")
        self.next_btn = QToolButton()
        self.next_btn.setText("›")
        self.next_btn.setToolTip("Next version")
        self.next_btn.clicked.connect(lambda: self.stepped.emit(+1))
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        for w in (self.prev_btn, self.label, self.next_btn):
            lay.addWidget(w)
        for b in (self.prev_btn, self.next_btn):
            b.setAutoRaise(True)
        self.index, self.count = 1, 1
        self.setVisible(False)

    def set_position(self, index: int, count: int, enabled: bool = True) -> None:
        """Show `index/count`; hidden for a message with one version, arrows off at the ends (or while busy)."""
        self.index, self.count = index, count
        self.label.setText(f"{index}/{count}")
        self.prev_btn.setEnabled(enabled and index > 1)
        self.next_btn.setEnabled(enabled and index < count)
        self.setVisible(count > 1)

    def text(self) -> str:
        return f"{self.prev_btn.text()} {self.label.text()} {self.next_btn.text()}"


class EditBox(QWidget):
    """A user message edited in place: its text, Send (as a new version, the old one kept) and Cancel."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.editor = QPlainTextEdit(text)
        self.editor.setFixedHeight(80)
        self.send_btn = QPushButton("Send")
        self.send_btn.setToolTip("Send the edited message; the earlier version and its replies stay a branch")
        self.cancel_btn = QPushButton("Cancel")
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.cancel_btn)
        row.addWidget(self.send_btn)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.editor)
        lay.addLayout(row)


class MessageWidget(QFrame):
    """One message bubble: role + stats header, the rendered body, Copy / Edit / Regenerate and `‹ i/n ›`."""

    regenerate = Signal(object)  # this bubble's Message: generate another version of this reply
    edited = Signal(object, str)  # this bubble's Message and its new text: send it as a new version
    switched = Signal(object, int)  # this bubble's Message and -1 / +1: show its previous / next version

    def __init__(self, message: Message | None, role: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.message = message
        self.role = role
        self.content = message.content if message else ""
        self.setObjectName("bubble_" + role)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        bg = {"user": "#e8f0fe", "assistant": "#ffffff", "error": "#fdecea"}.get(role, "#ffffff")
        self.setStyleSheet(
            f"QFrame#bubble_{role} {{ background: {bg}; border: 1px solid #dadce0; border-radius: 8px; }}"
        )
        self.stats_label = QLabel("")
        self.stats_label.setStyleSheet("color: #666; font-size: 11px;")
        self.stats_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stats_label.setWordWrap(True)  # the whole footer, DD's decision too, not clipped at the edge
        self.body = MarkdownView()
        self.live: StreamingBody | None = None  # while a reply streams (plain Markdown, no highlighting)
        self.edit_box: EditBox | None = None  # while the user edits this message
        self._can_edit = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 6)
        lay.setSpacing(2)
        lay.addLayout(self._build_head(role))
        lay.addWidget(self.body)
        self.tool_calls = ToolCallsView()
        self.thinking = ThinkingBox()  # collapsed under the answer
        lay.addWidget(self.tool_calls)
        lay.addWidget(self.thinking)
        lay.addWidget(self.stats_label)
        self.stats_label.setVisible(False)
        if message is not None:
            self.set_text(message.content)
            if message.stats:
                self.set_stats(message.stats)

    def _build_head(self, role: str) -> QHBoxLayout:
        """Who wrote it, then the version switch and the Edit / Regenerate / Copy buttons."""
        who = QLabel({"user": "You", "assistant": "Assistant", "error": "Error"}.get(role, role.title()))
        who.setStyleSheet("font-weight: bold; color: #444;")
        self.branch = BranchSwitch()
        self.branch.stepped.connect(lambda step: self.switched.emit(self.message, step))
        self.copy_btn = QPushButton("Copy")
        self.copy_btn.setFlat(True)
        self.copy_btn.setToolTip("Copy this message as Markdown")
        self.copy_btn.clicked.connect(self.copy)
        self.edit_btn = QPushButton("Edit")
        self.edit_btn.setFlat(True)
        self.edit_btn.setToolTip("Edit and send again; this version and its replies stay a branch")
        self.edit_btn.setVisible(False)
        self.edit_btn.clicked.connect(self.start_edit)
        self.regen_btn = QPushButton("Regenerate")
        self.regen_btn.setFlat(True)
        self.regen_btn.setToolTip("Generate another version of this reply; this one stays a branch")
        self.regen_btn.setVisible(False)
        self.regen_btn.clicked.connect(lambda: self.regenerate.emit(self.message))
        head = QHBoxLayout()
        head.addWidget(who)
        head.addStretch(1)
        for w in (self.branch, self.edit_btn, self.regen_btn, self.copy_btn):
            head.addWidget(w)
        return head

    def set_actions(self, generate: bool, switch: bool) -> None:
        """Offer Edit (your messages) and Regenerate (saved replies) where `generate`, the version arrows where
        `switch`."""
        saved = self.message is not None and self.message.id > 0  # not an error notice or a streaming reply
        self._can_edit = generate and saved and self.role == "user"
        self.edit_btn.setVisible(self._can_edit and self.edit_box is None)
        if self.edit_box is not None:
            self.edit_box.send_btn.setEnabled(generate)
        self.regen_btn.setVisible(generate and saved and self.role == "assistant")
        self.branch.set_position(self.branch.index, self.branch.count, switch)

    def start_edit(self) -> None:
        """Swap the text for an editor; its Send emits `edited`, Cancel puts the text back."""
        if self.edit_box is not None:
            return
        self.edit_box = EditBox(self.content)
        self.edit_box.send_btn.clicked.connect(self._send_edit)
        self.edit_box.cancel_btn.clicked.connect(self.cancel_edit)
        lay = self.layout()
        assert isinstance(lay, QVBoxLayout)
        lay.insertWidget(lay.indexOf(self.body), self.edit_box)
        self.body.setVisible(False)
        self.edit_btn.setVisible(False)
        self.edit_box.editor.setFocus()

    def cancel_edit(self) -> None:
        if self.edit_box is not None:
            self.edit_box.setParent(None)
            self.edit_box.deleteLater()
            self.edit_box = None
            self.body.setVisible(True)
            self.edit_btn.setVisible(self._can_edit)

    def _send_edit(self) -> None:
        text = self.edit_box.editor.toPlainText().strip() if self.edit_box is not None else ""
        if text:
            self.edited.emit(self.message, text)

    def _parts(self, text: str, counts: list[Segment] | None) -> ReplyParts:
        """The answer, thinking and tool calls of an assistant reply (shown apart); `counts` counts the thinking."""
        if counts is None and self.message is not None and self.message.stats:
            counts = [(str(a), int(b), int(c)) for a, b, c in self.message.stats.get("segments") or []] or None
        parts = split_reply(text, counts)
        self.thinking.show_parts(parts)
        self.tool_calls.show_calls(parts.calls)
        return parts

    def stream_text(self, text: str, counts: list[Segment] | None = None) -> None:
        """Show a growing reply incrementally (see StreamingBody); `set_text` renders the final text as one."""
        self.content = text
        if self.role == "assistant":
            parts = self._parts(text, counts)
            text = parts.content or ("…" if parts.thinking or not parts.reasoning else "")
        if self.live is None:
            self.live = StreamingBody()
            lay = self.layout()
            assert isinstance(lay, QVBoxLayout)
            lay.insertWidget(lay.indexOf(self.body), self.live)
            self.body.setVisible(False)
        self.live.update_text(text)

    def set_text(
        self, text: str, segments: list[tuple[str, int, int]] | None = None, counts: list[Segment] | None = None
    ) -> None:
        """Show `text`; `segments` highlights drafted tokens in the raw reply, `counts` gives thinking its tokens."""
        self.content = text
        if self.live is not None:
            self.live.setParent(None)
            self.live.deleteLater()
            self.live = None
            self.body.setVisible(True)
        if segments is not None:
            self.body.render_highlighted(segments)
            self.thinking.setVisible(False)
            self.tool_calls.setVisible(False)
        elif self.role == "user":
            self.body.setPlainText(text)  # users type plain text; don't reinterpret their * and _
        elif self.role == "assistant":
            parts = self._parts(text, counts)
            self.body.render_markdown(parts.content)
            self.body.setVisible(bool(parts.content) or not (parts.reasoning or parts.calls))
        else:
            self.body.render_markdown(text)

    def set_stats(self, stats: dict[str, Any]) -> None:
        self.stats_label.setText(format_stats(stats))
        self.stats_label.setVisible(True)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.content)
