"""The chat view: conversation list, streamed Markdown replies with stats, per-conversation settings."""

from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor, QGuiApplication, QKeyEvent, QKeySequence, QShortcut, QTextBlockFormat, QTextCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.engine.sampling import SamplingParams
from app.engine.types import GenerationRequest, GenerationSummary, TextEvent
from app.gui.bridge import GenerationBridge
from app.gui.reply_parts import Segment, ThinkingBox, ToolCallsView, split_reply
from app.gui.store import DEFAULT_TITLE, ChatStore, Conversation, Message
from app.speculative.settings import PLAIN, SpecSettings

if TYPE_CHECKING:  # the engine (and llama.cpp) is imported only where a model is loaded
    from app.engine.worker import Engine

RENDER_MS = 80  # the streaming reply is re-rendered at ~12 fps, not per token (Markdown layout is O(length))

DEFAULT_CHAT_SETTINGS: dict[str, Any] = {
    "temperature": 0.7,
    "top_p": 0.95,
    "top_k": 40,
    "min_p": 0.05,
    "repeat_penalty": 1.0,
    "max_tokens": 512,
    "seed": None,
    "spec_mode": "auto",  # auto (Dynamic Draft / engine default) | off | lookup | draft
    "spec_n_max": 8,
    "spec_p_min": 0.5,
}
SPEC_MODES = {
    "auto": "Auto (Dynamic Draft)",
    "off": "Off (plain decoding)",
    "lookup": "Prompt lookup",
    "draft": "Draft model",
}


def chat_settings(conv: Conversation) -> dict[str, Any]:
    """The conversation's settings with defaults filled in (older rows may lack newer keys)."""
    return {**DEFAULT_CHAT_SETTINGS, **(conv.settings or {})}


def spec_from_settings(s: dict[str, Any]) -> SpecSettings | None:
    """None lets Dynamic Draft (or the engine default) decide; otherwise an explicit request override."""
    mode = s.get("spec_mode", "auto")
    if mode == "auto":
        return None
    if mode == "off":
        return PLAIN
    return SpecSettings(source=mode, n_max=int(s["spec_n_max"]), p_min=float(s["spec_p_min"]))


def build_request(conv: Conversation, history: list[Message]) -> GenerationRequest:
    """The engine request for a conversation: system prompt + user/assistant turns, with its sampling settings."""
    s = chat_settings(conv)
    msgs: list[dict[str, str]] = []
    if conv.system_prompt.strip():
        msgs.append({"role": "system", "content": conv.system_prompt})
    msgs += [{"role": m.role, "content": m.content} for m in history if m.role in ("user", "assistant")]
    seed = s.get("seed")
    return GenerationRequest(
        messages=tuple(msgs),
        max_tokens=int(s["max_tokens"]),
        sampling=SamplingParams(
            temperature=float(s["temperature"]),
            top_k=int(s["top_k"]),
            top_p=float(s["top_p"]),
            min_p=float(s["min_p"]),
            repeat_penalty=float(s["repeat_penalty"]),
            seed=None if seed in (None, "") else int(seed),
        ),
        speculative=spec_from_settings(s),
        request_id=f"gui-{conv.id}-{int(time.time() * 1000)}",
        echo_open_think=True,  # a template that opens <think> in the prompt: the reply still shows its thinking
    )


def reply_stats(summary: GenerationSummary, ttft_s: float | None) -> dict[str, Any]:
    """What each reply shows and persists: speed, latency, acceptance and the Dynamic Draft decision."""
    t = summary.timings
    dd = summary.dynamic_draft or {}
    selected = dd.get("selected")
    try:
        dd_label = SpecSettings.from_dict(selected).label() if isinstance(selected, dict) else summary.settings.label()
    except (TypeError, ValueError):
        dd_label = summary.settings.label()
    return {
        "tokens": t.predicted_n,
        "tok_s": t.predicted_per_second,
        "ttft_ms": round(ttft_s * 1000.0, 1) if ttft_s is not None else None,
        "prompt_tokens": summary.prompt_tokens,
        "prompt_ms": t.prompt_ms,
        "draft_n": t.draft_n,
        "draft_accepted": t.draft_n_accepted,
        "acceptance": (t.draft_n_accepted / t.draft_n) if t.draft_n else None,
        "steps": summary.steps,
        "finish_reason": summary.finish_reason,
        "spec": summary.settings.label(),
        "dd": {"applied": bool(dd.get("applied")), "reason": dd.get("reason"), "setting": dd_label},
    }


def format_stats(stats: dict[str, Any]) -> str:
    """One line for a reply's footer."""
    parts = [f"{stats.get('tok_s') or 0:.1f} tok/s"]
    if stats.get("ttft_ms") is not None:
        parts.append(f"first token {stats['ttft_ms']:.0f} ms")
    if stats.get("acceptance") is not None:
        parts.append(f"acceptance {stats['acceptance']:.0%} ({stats['draft_accepted']}/{stats['draft_n']})")
    else:
        parts.append("no drafts")
    parts.append(f"{stats.get('tokens', 0)} tokens")
    dd = stats.get("dd") or {}
    state = "on" if dd.get("applied") else "off"
    parts.append(f"DD {state}: {dd.get('setting', stats.get('spec', '?'))} ({dd.get('reason') or 'n/a'})")
    if stats.get("finish_reason") == "cancelled":
        parts.append("stopped")
    elif stats.get("finish_reason") == "length":
        parts.append("hit max tokens")
    return " · ".join(parts)


# -- widgets -------------------------------------------------------------------------------------------------------
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


class MessageWidget(QFrame):
    """One message bubble: role + stats header, the rendered body, and Copy / Regenerate buttons."""

    regenerate = Signal()

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
        who = QLabel({"user": "You", "assistant": "Assistant", "error": "Error"}.get(role, role.title()))
        who.setStyleSheet("font-weight: bold; color: #444;")
        self.stats_label = QLabel("")
        self.stats_label.setStyleSheet("color: #666; font-size: 11px;")
        self.stats_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_btn = QPushButton("Copy")
        self.copy_btn.setFlat(True)
        self.copy_btn.setToolTip("Copy this message as Markdown")
        self.copy_btn.clicked.connect(self.copy)
        self.regen_btn = QPushButton("Regenerate")
        self.regen_btn.setFlat(True)
        self.regen_btn.setVisible(False)
        self.regen_btn.clicked.connect(self.regenerate)
        head = QHBoxLayout()
        head.addWidget(who)
        head.addStretch(1)
        head.addWidget(self.regen_btn)
        head.addWidget(self.copy_btn)
        self.body = MarkdownView()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 6)
        lay.setSpacing(2)
        lay.addLayout(head)
        lay.addWidget(self.body)
        self.thinking = ThinkingBox()  # collapsed under the answer
        self.tool_calls = ToolCallsView()
        lay.addWidget(self.tool_calls)
        lay.addWidget(self.thinking)
        lay.addWidget(self.stats_label)
        self.stats_label.setVisible(False)
        if message is not None:
            self.set_text(message.content)
            if message.stats:
                self.set_stats(message.stats)

    def set_text(
        self, text: str, segments: list[tuple[str, int, int]] | None = None, counts: list[Segment] | None = None
    ) -> None:
        """Show `text`; `segments` highlights drafted tokens (the raw reply), `counts` gives thinking its tokens."""
        self.content = text
        if segments is not None:
            self.body.render_highlighted(segments)
            self.thinking.setVisible(False)
            self.tool_calls.setVisible(False)
        elif self.role == "user":
            self.body.setPlainText(text)  # users type plain text; don't reinterpret their * and _
        elif self.role == "assistant":
            if counts is None and self.message is not None and self.message.stats:
                counts = [tuple(x) for x in self.message.stats.get("segments") or []] or None  # type: ignore[misc]
            parts = split_reply(text, counts)
            self.body.render_markdown(parts.content or ("…" if parts.thinking else ""))
            self.body.setVisible(bool(parts.content) or parts.thinking or not (parts.reasoning or parts.calls))
            self.thinking.show_parts(parts)
            self.tool_calls.show_calls(parts.calls)
        else:
            self.body.render_markdown(text)

    def set_stats(self, stats: dict[str, Any]) -> None:
        self.stats_label.setText(format_stats(stats))
        self.stats_label.setVisible(True)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.content)


class ChatInput(QPlainTextEdit):
    """Enter sends, Shift+Enter inserts a newline."""

    submitted = Signal()

    def keyPressEvent(self, e: QKeyEvent) -> None:  # noqa: N802 - Qt API
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (e.modifiers() & Qt.KeyboardModifier.ShiftModifier):
            self.submitted.emit()
            return
        super().keyPressEvent(e)


class ConversationList(QWidget):
    """Search box, New button and the conversations (newest first); right-click to rename or delete."""

    selected = Signal(int)
    new_requested = Signal()
    rename_requested = Signal(int)
    delete_requested = Signal(int)

    def __init__(self, store: ChatStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search chats…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _t: self.reload())
        self.new_btn = QPushButton("+ New chat")
        self.new_btn.clicked.connect(self.new_requested)
        self.list = QListWidget()
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.currentItemChanged.connect(self._changed)
        self.list.itemDoubleClicked.connect(
            lambda it: self.rename_requested.emit(int(it.data(Qt.ItemDataRole.UserRole)))
        )
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.new_btn)
        lay.addWidget(self.search)
        lay.addWidget(self.list, 1)
        self._reloading = False

    def reload(self, select: int | None = None) -> None:
        current = select if select is not None else self.current_id()
        self._reloading = True
        try:
            self.list.clear()
            for conv in self.store.list_conversations(self.search.text().strip()):
                it = QListWidgetItem(conv.title)
                it.setData(Qt.ItemDataRole.UserRole, conv.id)
                it.setToolTip(time.strftime("%Y-%m-%d %H:%M", time.localtime(conv.updated)))
                self.list.addItem(it)
                if conv.id == current:
                    self.list.setCurrentItem(it)
        finally:
            self._reloading = False

    def current_id(self) -> int | None:
        it = self.list.currentItem()
        return int(it.data(Qt.ItemDataRole.UserRole)) if it is not None else None

    def _changed(self, cur: QListWidgetItem | None, _prev: QListWidgetItem | None) -> None:
        if cur is not None and not self._reloading:
            self.selected.emit(int(cur.data(Qt.ItemDataRole.UserRole)))

    def _menu(self, pos: Any) -> None:
        it = self.list.itemAt(pos)
        if it is None:
            return
        cid = int(it.data(Qt.ItemDataRole.UserRole))
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self.rename_requested.emit(cid))
        menu.addAction("Delete", lambda: self.delete_requested.emit(cid))
        menu.exec(self.list.mapToGlobal(pos))


class ConversationSettingsDialog(QDialog):
    """System prompt, sampling and speculation settings of one conversation."""

    def __init__(self, conv: Conversation, has_draft: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Chat settings — {conv.title}")
        s = chat_settings(conv)
        self.system = QPlainTextEdit(conv.system_prompt)
        self.system.setPlaceholderText("Optional system prompt, e.g. “You are a concise coding assistant.”")
        self.system.setFixedHeight(90)
        self.temperature = _dspin(0, 2, 0.05, s["temperature"], "0 = greedy (deterministic)")
        self.top_p = _dspin(0.01, 1, 0.01, s["top_p"])
        self.top_k = _ispin(0, 1000, s["top_k"], "0 = off")
        self.min_p = _dspin(0, 1, 0.01, s["min_p"])
        self.repeat_penalty = _dspin(0.5, 2.0, 0.05, s["repeat_penalty"], "1 = off")
        self.max_tokens = _ispin(1, 32768, s["max_tokens"])
        self.seed = QLineEdit("" if s["seed"] is None else str(s["seed"]))
        self.seed.setPlaceholderText("random")
        self.spec_mode = QComboBox()
        for key, label in SPEC_MODES.items():
            self.spec_mode.addItem(label, key)
        self.spec_mode.setCurrentIndex(max(0, self.spec_mode.findData(s["spec_mode"])))
        if not has_draft:
            idx = self.spec_mode.findData("draft")
            self.spec_mode.model().item(idx).setEnabled(False)  # type: ignore[attr-defined]
            self.spec_mode.setItemData(idx, "Load a draft model to use this", Qt.ItemDataRole.ToolTipRole)
        self.spec_n_max = _ispin(1, 64, s["spec_n_max"], "deepest draft per step")
        self.spec_p_min = _dspin(0, 1, 0.05, s["spec_p_min"], "stop drafting below this draft probability")
        form = QFormLayout()
        form.addRow("System prompt", self.system)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Top-k", self.top_k)
        form.addRow("Min-p", self.min_p)
        form.addRow("Repeat penalty", self.repeat_penalty)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow("Seed", self.seed)
        form.addRow("Speculation", self.spec_mode)
        form.addRow("Draft depth (n_max)", self.spec_n_max)
        form.addRow("Draft p_min", self.spec_p_min)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(buttons)

    def values(self) -> tuple[str, dict[str, Any]]:
        seed_text = self.seed.text().strip()
        return self.system.toPlainText(), {
            "temperature": self.temperature.value(),
            "top_p": self.top_p.value(),
            "top_k": self.top_k.value(),
            "min_p": self.min_p.value(),
            "repeat_penalty": self.repeat_penalty.value(),
            "max_tokens": self.max_tokens.value(),
            "seed": int(seed_text) if seed_text.lstrip("-").isdigit() else None,
            "spec_mode": self.spec_mode.currentData(),
            "spec_n_max": self.spec_n_max.value(),
            "spec_p_min": self.spec_p_min.value(),
        }


def _dspin(lo: float, hi: float, step: float, value: float, tip: str = "") -> QDoubleSpinBox:
    w = QDoubleSpinBox()
    w.setRange(lo, hi)
    w.setSingleStep(step)
    w.setDecimals(2)
    w.setValue(float(value))
    w.setToolTip(tip)
    return w


def _ispin(lo: int, hi: int, value: int, tip: str = "") -> QSpinBox:
    w = QSpinBox()
    w.setRange(lo, hi)
    w.setValue(int(value))
    w.setToolTip(tip)
    return w


@dataclass
class _Reply:
    """The reply being generated: where it goes, what has arrived, and its bridge."""

    conversation_id: int
    bridge: GenerationBridge
    text: str = ""
    segments: list[tuple[str, int, int]] = field(default_factory=list)
    widget: MessageWidget | None = None
    dirty: bool = False
    stop_requested: bool = False
    summary: GenerationSummary | None = None
    error: str | None = None


class ChatPanel(QWidget):
    """Conversations on the left, the transcript and the composer on the right; one reply streams at a time."""

    reply_started = Signal()
    reply_finished = Signal(object)  # the persisted assistant Message, or None (failed / nothing generated)
    reply_failed = Signal(str)
    text_received = Signal(str)  # each streamed piece (for tests and the status bar)

    def __init__(self, store: ChatStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.engine: Engine | None = None
        self.has_draft = False
        self.conv: Conversation | None = None
        self.reply: _Reply | None = None
        self._last_bridge: GenerationBridge | None = None  # kept alive until its thread is surely done

        self.conversations = ConversationList(store)
        self.conversations.setMinimumWidth(180)
        self.conversations.selected.connect(self.open_conversation)
        self.conversations.new_requested.connect(self.new_conversation)
        self.conversations.rename_requested.connect(self.rename_conversation)
        self.conversations.delete_requested.connect(self.delete_conversation)

        self.title = QLabel("")
        self.title.setStyleSheet("font-size: 15px; font-weight: bold;")
        self.settings_btn = QPushButton("Chat settings…")
        self.settings_btn.setToolTip("System prompt, sampling and speculation for this chat")
        self.settings_btn.clicked.connect(self.edit_settings)
        self.highlight = QCheckBox("Highlight drafted tokens")
        self.highlight.setToolTip("Shade text that came from accepted speculative drafts (shown as plain text)")
        self.highlight.toggled.connect(lambda _on: self._rerender_last())
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(self.highlight)
        head.addWidget(self.settings_btn)

        self.banner = QLabel("")
        self.banner.setWordWrap(True)
        self.banner.setVisible(False)
        self.banner.setStyleSheet("background: #fff4e5; border: 1px solid #f0c36d; padding: 6px; border-radius: 4px;")

        self.transcript = QWidget()
        self.transcript.setObjectName("transcript")
        self.transcript.setStyleSheet("QWidget#transcript { background: #fafafa; }")
        self.tlayout = QVBoxLayout(self.transcript)
        self.tlayout.setContentsMargins(8, 8, 8, 8)
        self.tlayout.setSpacing(8)
        self.tlayout.addStretch(1)
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setWidget(self.transcript)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll_area.verticalScrollBar().rangeChanged.connect(self._follow)
        self._at_bottom = True
        self.scroll_area.verticalScrollBar().valueChanged.connect(self._track_bottom)

        self.input = ChatInput()
        self.input.setPlaceholderText("Message  (Enter to send, Shift+Enter for a new line, Esc to stop)")
        self.input.setFixedHeight(80)
        self.input.submitted.connect(self.send)
        self.send_btn = QPushButton("Send")
        self.send_btn.setDefault(True)
        self.send_btn.clicked.connect(self.send)
        self.stop_btn = QPushButton("Stop")
        self.stop_btn.setToolTip("Stop generating (Esc)")
        self.stop_btn.clicked.connect(self.stop)
        self.stop_btn.setEnabled(False)
        btns = QVBoxLayout()
        btns.addWidget(self.send_btn)
        btns.addWidget(self.stop_btn)
        compose = QHBoxLayout()
        compose.addWidget(self.input, 1)
        compose.addLayout(btns)

        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addLayout(head)
        rl.addWidget(self.banner)
        rl.addWidget(self.scroll_area, 1)
        rl.addLayout(compose)

        self.splitter = QSplitter()
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([220, 700])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.splitter)

        esc = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        esc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        esc.activated.connect(self.stop)

        self.render_timer = QTimer(self)
        self.render_timer.setInterval(RENDER_MS)
        self.render_timer.timeout.connect(self._render_stream)

        convs = store.list_conversations()
        self.conversations.reload()
        if convs:
            self.open_conversation(convs[0].id)
        else:
            self.title.setText(DEFAULT_TITLE)  # created on first send, so merely opening the app writes nothing
        self._update_controls()

    # -- engine ---------------------------------------------------------------------------------------------------
    def set_engine(self, engine: Engine | None, has_draft: bool = False) -> None:
        if self.reply is not None and engine is not self.engine:
            self.stop()
        self.engine = engine
        self.has_draft = has_draft
        self._update_controls()

    def set_banner(self, text: str) -> None:
        self.banner.setText(text)
        self.banner.setVisible(bool(text))

    @property
    def busy(self) -> bool:
        return self.reply is not None

    def _update_controls(self) -> None:
        ready = self.engine is not None
        self.send_btn.setEnabled(ready and not self.busy)
        self.stop_btn.setEnabled(self.busy)
        if self.engine is None:
            self.input.setPlaceholderText("Load a model to chat (Model ▸ Open model…, or use the demo model)")
        else:
            self.input.setPlaceholderText("Message  (Enter to send, Shift+Enter for a new line, Esc to stop)")

    # -- conversations --------------------------------------------------------------------------------------------
    def new_conversation(self) -> None:
        settings = dict(chat_settings(self.conv)) if self.conv is not None else dict(DEFAULT_CHAT_SETTINGS)
        system = self.conv.system_prompt if self.conv is not None else ""
        conv = self.store.create_conversation(DEFAULT_TITLE, system, settings)
        self.conversations.search.clear()
        self.conversations.reload(select=conv.id)
        self.open_conversation(conv.id)

    def open_conversation(self, conversation_id: int) -> None:
        conv = self.store.get_conversation(conversation_id)
        if conv is None:
            return
        self.conv = conv
        self.title.setText(conv.title)
        if self.conversations.current_id() != conv.id:
            self.conversations.reload(select=conv.id)
        self._clear_transcript()
        for m in self.store.messages(conv.id):
            self._add_bubble(m, m.role)
        if self.reply is not None and self.reply.conversation_id == conv.id:
            self.reply.widget = self._add_bubble(None, "assistant")
            self.reply.dirty = True
        self._mark_last_regenerable()
        self._update_controls()
        self.input.setFocus()

    def rename_conversation(self, conversation_id: int) -> None:
        conv = self.store.get_conversation(conversation_id)
        if conv is None:
            return
        title, ok = QInputDialog.getText(self, "Rename chat", "Title:", text=conv.title)
        if ok:
            self.store.rename_conversation(conversation_id, title)
            self.conversations.reload()
            if self.conv is not None and self.conv.id == conversation_id:
                self.conv = self.store.get_conversation(conversation_id)
                self.title.setText(self.conv.title if self.conv else "")

    def delete_conversation(self, conversation_id: int, confirm: bool = True) -> None:
        if self.reply is not None and self.reply.conversation_id == conversation_id:
            self.stop()
        if confirm:
            answer = QMessageBox.question(self, "Delete chat", "Delete this chat and all its messages?")
            if answer != QMessageBox.StandardButton.Yes:
                return
        self.store.delete_conversation(conversation_id)
        remaining = self.store.list_conversations()
        if self.conv is not None and self.conv.id == conversation_id:
            self.conv = None
            if remaining:
                self.open_conversation(remaining[0].id)
            else:
                self.new_conversation()
        self.conversations.reload()

    def edit_settings(self) -> None:
        if self.conv is None:
            self.new_conversation()
        assert self.conv is not None
        dlg = ConversationSettingsDialog(self.conv, self.has_draft, self)
        if dlg.exec() == QDialog.DialogCode.Accepted:
            system, settings = dlg.values()
            self.apply_settings(system, settings)

    def apply_settings(self, system_prompt: str | None = None, settings: dict[str, Any] | None = None) -> None:
        """Update the open conversation's system prompt and/or (a subset of) its settings."""
        if self.conv is None:
            return
        merged = {**chat_settings(self.conv), **(settings or {})}
        self.store.update_conversation(self.conv.id, system_prompt=system_prompt, settings=merged)
        self.conv = self.store.get_conversation(self.conv.id)

    # -- transcript -----------------------------------------------------------------------------------------------
    def _clear_transcript(self) -> None:
        while self.tlayout.count() > 1:
            item = self.tlayout.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None:
                w.deleteLater()
        if self.reply is not None:
            self.reply.widget = None

    def bubbles(self) -> list[MessageWidget]:
        out = []
        for i in range(self.tlayout.count()):
            item = self.tlayout.itemAt(i)
            w = item.widget() if item is not None else None
            if isinstance(w, MessageWidget):
                out.append(w)
        return out

    def _add_bubble(self, message: Message | None, role: str) -> MessageWidget:
        w = MessageWidget(message, role)
        w.regenerate.connect(self.regenerate)
        self.tlayout.insertWidget(self.tlayout.count() - 1, w)
        return w

    def _mark_last_regenerable(self) -> None:
        bubbles = self.bubbles()
        for b in bubbles:
            b.regen_btn.setVisible(False)
        if bubbles and bubbles[-1].role == "assistant" and bubbles[-1].message is not None and not self.busy:
            bubbles[-1].regen_btn.setVisible(True)

    def _track_bottom(self, value: int) -> None:
        bar = self.scroll_area.verticalScrollBar()
        self._at_bottom = value >= bar.maximum() - 4

    def _follow(self, _lo: int, hi: int) -> None:
        # Keep following the stream only if the user has not scrolled up to read something.
        if self._at_bottom:
            self.scroll_area.verticalScrollBar().setValue(hi)

    def _rerender_last(self) -> None:
        for b in self.bubbles():
            if b.role == "assistant" and b.message is not None and b.message.stats:
                segs = b.message.stats.get("segments") if self.highlight.isChecked() else None
                b.set_text(b.content, [tuple(s) for s in segs] if segs else None)  # type: ignore[misc]
        if self.reply is not None:
            self.reply.dirty = True

    # -- generation -----------------------------------------------------------------------------------------------
    def send(self, text: str | None = None) -> bool:
        """Send the composer's text (or `text`) as a user message and stream the reply; False if not possible."""
        if self.engine is None or self.busy:
            return False
        text = (text if isinstance(text, str) else self.input.toPlainText()).strip()
        if not text:
            return False
        if self.conv is None:
            self.new_conversation()
        assert self.conv is not None
        self.input.clear()
        msg = self.store.add_message(self.conv.id, "user", text)
        if self.conv.title == DEFAULT_TITLE:
            title = " ".join(text.split())[:48] + ("…" if len(text) > 48 else "")
            self.store.rename_conversation(self.conv.id, title)
            self.conv = self.store.get_conversation(self.conv.id)
            self.title.setText(self.conv.title if self.conv else title)
        self.conversations.reload(select=self.conv.id if self.conv else None)
        self._add_bubble(msg, "user")
        self._at_bottom = True
        self._generate()
        return True

    def regenerate(self) -> None:
        """Drop the last assistant reply and generate it again from the same history."""
        if self.engine is None or self.conv is None or self.busy:
            return
        msgs = self.store.messages(self.conv.id)
        if not msgs or msgs[-1].role != "assistant":
            return
        self.store.delete_message(msgs[-1].id)
        bubbles = self.bubbles()
        if bubbles and bubbles[-1].role == "assistant":
            bubbles[-1].deleteLater()
            self.tlayout.removeWidget(bubbles[-1])
        self._generate()

    def _generate(self) -> None:
        assert self.engine is not None and self.conv is not None
        try:
            request = build_request(self.conv, self.store.messages(self.conv.id))
        except Exception as e:  # bad settings (e.g. out-of-range values from an old row)
            self._show_error(f"Invalid chat settings: {e}")
            return
        bridge = GenerationBridge(self.engine, request, self)
        reply = _Reply(self.conv.id, bridge)
        reply.widget = self._add_bubble(None, "assistant")
        reply.widget.body.setPlainText("…")
        self.reply = reply
        bridge.text.connect(self._on_text)
        bridge.done.connect(self._on_done)
        bridge.failed.connect(self._on_failed)
        bridge.finished.connect(self._on_finished)
        self._mark_last_regenerable()
        self._update_controls()
        self.render_timer.start()
        bridge.start()
        self.reply_started.emit()

    def stop(self) -> None:
        if self.reply is not None:
            self.reply.stop_requested = True
            self.reply.bridge.cancel()

    def _on_text(self, ev: TextEvent) -> None:
        r = self.reply
        if r is None:
            return
        r.text += ev.text
        r.segments.append((ev.text, ev.drafted, ev.n_tokens))
        r.dirty = True
        self.text_received.emit(ev.text)

    def _on_done(self, summary: GenerationSummary) -> None:
        if self.reply is not None:
            self.reply.summary = summary

    def _on_failed(self, message: str) -> None:
        if self.reply is not None:
            self.reply.error = message

    def _render_stream(self) -> None:
        r = self.reply
        if r is None or not r.dirty or r.widget is None:
            return
        r.dirty = False
        r.widget.set_text(r.text or "…", r.segments if self.highlight.isChecked() else None, r.segments)

    def _on_finished(self) -> None:
        r = self.reply
        if r is None:
            return
        self.reply = None
        self._last_bridge = r.bridge
        self.render_timer.stop()
        saved: Message | None = None
        if r.summary is not None and (r.summary.text or r.summary.finish_reason != "cancelled"):
            stats = reply_stats(r.summary, r.bridge.ttft)
            # Keep the draft provenance so "Highlight drafted tokens" also works for past replies.
            stats["segments"] = [list(s) for s in r.segments]
            saved = self.store.add_message(r.conversation_id, "assistant", r.summary.text, stats)
        if r.widget is not None:
            if saved is not None:
                r.widget.message = saved
                r.widget.set_text(saved.content, r.segments if self.highlight.isChecked() else None, r.segments)
                r.widget.set_stats(saved.stats or {})
            else:
                r.widget.deleteLater()
                self.tlayout.removeWidget(r.widget)
        if r.error and not r.stop_requested:
            self._show_error(r.error)
            self.reply_failed.emit(r.error)
        self.conversations.reload()
        self._mark_last_regenerable()
        self._update_controls()
        self.reply_finished.emit(saved)

    def _show_error(self, message: str) -> None:
        w = self._add_bubble(Message(0, 0, "error", message), "error")
        w.copy_btn.setVisible(True)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Cancel a running reply and wait briefly for its pump thread (window close)."""
        if self.reply is not None:
            self.reply.bridge.cancel()
            self.reply.bridge.wait(timeout)
