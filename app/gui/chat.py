"""The chat panel: the transcript and composer around one streaming reply, beside the conversation list."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.engine.types import GenerationSummary
from app.gui import branches, chat_export
from app.gui.bridge import GenerationBridge
from app.gui.chat_request import DEFAULT_CHAT_SETTINGS, build_request, chat_settings, context_used, reply_stats
from app.gui.chat_settings import ConversationSettingsDialog
from app.gui.conversation_list import ConversationList
from app.gui.message_view import MessageWidget
from app.gui.store import DEFAULT_TITLE, ChatStore, Conversation, Message

if TYPE_CHECKING:  # the engine (and llama.cpp) is imported only where a model is loaded
    from app.engine.worker import Engine

RENDER_MS = 80  # the streaming reply takes its new text and redraws at ~12 fps, never per token


class ChatInput(QPlainTextEdit):
    """Enter sends, Shift+Enter inserts a newline."""

    submitted = Signal()

    def keyPressEvent(self, e: QKeyEvent) -> None:  # noqa: N802 - Qt API
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (e.modifiers() & Qt.KeyboardModifier.ShiftModifier):
            self.submitted.emit()
            return
        super().keyPressEvent(e)


@dataclass
class _Reply:
    """The reply being generated: where it goes, what has arrived, and its bridge."""

    conversation_id: int
    bridge: GenerationBridge
    parent_id: int | None = None  # the message it answers: the reply is saved as that message's newest child
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
        self.sources: frozenset[str] | None = None  # the loaded model's draft sources (None: not known)
        self.conv: Conversation | None = None
        self.reply: _Reply | None = None
        self._last_bridge: GenerationBridge | None = None  # kept alive until its thread is surely done

        self._build_conversation_list()
        head = self._build_header()
        self._build_banner()
        self._build_transcript()
        compose = self._build_composer()
        self._build_splitter(head, compose)
        self._build_stop_shortcut()
        self.render_timer = QTimer(self)
        self.render_timer.setInterval(RENDER_MS)
        self.render_timer.timeout.connect(self._render_stream)

        self._open_latest_conversation()
        self._update_controls()

    # -- building -------------------------------------------------------------------------------------------------
    def _build_conversation_list(self) -> None:
        self.conversations = ConversationList(self.store)
        self.conversations.setMinimumWidth(180)
        self.conversations.selected.connect(self.open_conversation)
        self.conversations.new_requested.connect(self.new_conversation)
        self.conversations.rename_requested.connect(self.rename_conversation)
        self.conversations.delete_requested.connect(self.delete_conversation)
        self.conversations.export_requested.connect(self.export_conversation)

    def _build_header(self) -> QHBoxLayout:
        """The title row: the conversation's title, the highlight switch and the settings button."""
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
        return head

    def _build_banner(self) -> None:
        """The notice above the transcript, hidden until `set_banner` gives it text."""
        self.banner = QLabel("")
        self.banner.setWordWrap(True)
        self.banner.setVisible(False)
        self.banner.setStyleSheet("background: #fff4e5; border: 1px solid #f0c36d; padding: 6px; border-radius: 4px;")

    def _build_transcript(self) -> None:
        """The message bubbles in a scroll area that follows the bottom while the user has not scrolled up."""
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

    def _build_composer(self) -> QHBoxLayout:
        """The message box beside the Send and Stop buttons."""
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
        return compose

    def _build_splitter(self, head: QHBoxLayout, compose: QHBoxLayout) -> None:
        """The conversation list left of the title row, banner, transcript and composer."""
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

    def _build_stop_shortcut(self) -> None:
        """Esc anywhere in the panel stops the reply."""
        esc = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        esc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        esc.activated.connect(self.stop)

    def _open_latest_conversation(self) -> None:
        convs = self.store.list_conversations()
        self.conversations.reload()
        if convs:
            self.open_conversation(convs[0].id)
        else:
            self.title.setText(DEFAULT_TITLE)  # created on first send, so merely opening the app writes nothing

    # -- engine ---------------------------------------------------------------------------------------------------
    def set_engine(self, engine: Engine | None, has_draft: bool = False, sources: frozenset[str] | None = None) -> None:
        if self.reply is not None and engine is not self.engine:
            self.stop()
        self.engine = engine
        self.has_draft = has_draft
        self.sources = sources
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
        # QPlainTextEdit does not repaint for a new placeholder: seen under Xvfb, the first launch's box still read
        # "Load a model to chat" after the demo model had loaded, until something else redrew it.
        self.input.viewport().update()
        self._update_actions()

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
        self._render()
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

    def export_conversation(self, conversation_id: int | None = None) -> Path | None:
        """Save a chat (the open one by default) as Markdown or JSON, the format chosen by the file's suffix."""
        if conversation_id is None and self.conv is not None:
            conversation_id = self.conv.id
        conv = self.store.get_conversation(conversation_id) if conversation_id is not None else None
        if conv is None:
            return None
        name = re.sub(r"[^\w\- ]+", "", conv.title).strip() or "chat"
        path, _ = QFileDialog.getSaveFileName(
            self, "Export chat", str(Path.home() / f"{name}.md"), "Markdown (*.md);;JSON, imports back (*.json)"
        )
        if not path:
            return None
        out = Path(path)
        tree = self.store.tree(conv.id)
        active = branches.active_path(tree)
        as_json = out.suffix.lower() == ".json"
        try:  # JSON keeps the other branches too; Markdown is the chat as it reads now
            text = chat_export.to_json(conv, active, tree) if as_json else chat_export.to_markdown(conv, active)
            out.write_text(text, encoding="utf-8")
        except OSError as e:
            QMessageBox.warning(self, "Export chat", f"Could not write {out}: {e.strerror or e}")
            return None
        return out

    def import_conversation(self) -> Conversation | None:
        """Open a chat exported as JSON as a new chat (nothing existing is replaced)."""
        path, _ = QFileDialog.getOpenFileName(self, "Import chat", str(Path.home()), "DynaDraft chat (*.json)")
        if not path:
            return None
        try:
            conv = chat_export.import_json(self.store, Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, chat_export.ChatImportError) as e:
            QMessageBox.warning(self, "Import chat", f"Could not import {Path(path).name}: {e}")
            return None
        self.conversations.reload()
        self.open_conversation(conv.id)
        return conv

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
        dlg = ConversationSettingsDialog(self.conv, self.has_draft, self, sources=self.sources)
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
    def _render(self, keep: int = 0) -> None:
        """Show the open chat's active path, keeping its first `keep` bubbles (what lies above an edit or a switch
        is unchanged); while a reply streams here, the path ends at the message it answers, the reply below it."""
        assert self.conv is not None
        tree = self.store.tree(self.conv.id)
        path, places = branches.active_path(tree), branches.positions(tree)
        r = self.reply if self.reply is not None and self.reply.conversation_id == self.conv.id else None
        if r is not None:
            path = branches.up_to(path, r.parent_id)
        self._clear_transcript(keep)
        for m in path[keep:]:
            self._add_bubble(m, m.role, places.get(m.id))
        if r is not None:
            r.widget = self._add_bubble(None, "assistant")
            r.dirty = True

    def _clear_transcript(self, keep: int = 0) -> None:
        """Remove the bubbles after the first `keep`."""
        while self.tlayout.count() > keep + 1:  # the last item is the stretch that keeps bubbles at the top
            item = self.tlayout.takeAt(keep)
            w = item.widget() if item is not None else None
            if w is not None:
                w.deleteLater()
                if self.reply is not None and self.reply.widget is w:
                    self.reply.widget = None

    def bubbles(self) -> list[MessageWidget]:
        out = []
        for i in range(self.tlayout.count()):
            item = self.tlayout.itemAt(i)
            w = item.widget() if item is not None else None
            if isinstance(w, MessageWidget):
                out.append(w)
        return out

    def context_used(self) -> int | None:
        """Tokens of the context window the open chat's last reply used (its prompt and answer), from its stats."""
        for b in reversed(self.bubbles()):
            if b.role == "assistant" and b.message is not None and b.message.stats:
                return context_used(b.message.stats)
        return None

    def _add_bubble(self, message: Message | None, role: str, place: tuple[int, int] | None = None) -> MessageWidget:
        """A bubble at the end of the transcript; `place` is its (i, n) among the message's versions."""
        w = MessageWidget(message, role)
        w.regenerate.connect(self.regenerate)
        w.edited.connect(self.edit)
        w.switched.connect(self.switch_branch)
        if place is not None:
            w.branch.set_position(*place)
        w.set_actions(self.engine is not None and not self.busy, not self.busy)
        self.tlayout.insertWidget(self.tlayout.count() - 1, w)
        return w

    def _update_actions(self) -> None:
        # Edit and Regenerate need a model; no bubble's action may change the transcript under a streaming reply.
        for b in self.bubbles():
            b.set_actions(self.engine is not None and not self.busy, not self.busy)

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
                b.set_text(b.content, [tuple(s) for s in segs] if segs else None)
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
        self._generate(self.store.active_path(msg.conversation_id))
        return True

    def _path_index(self, message: Message | None) -> tuple[list[Message], int | None]:
        """The open chat's active path and where `message` is on it (None: not on it, or no chat)."""
        path = self.store.active_path(self.conv.id) if self.conv is not None else []
        ids = [m.id for m in path]
        return path, ids.index(message.id) if message is not None and message.id in ids else None

    def regenerate(self, message: Message | None = None) -> None:
        """Generate another version of a reply (the last one by default) from the history before it; the reply
        it replaces stays a branch, with whatever followed it."""
        if self.engine is None or self.conv is None or self.busy:
            return
        path, i = self._path_index(message)
        if message is None and path:
            i = len(path) - 1
        if i is None or path[i].role != "assistant":
            return
        self._clear_transcript(i)
        self._generate(path[:i])

    def edit(self, message: Message, text: str) -> bool:
        """Send `text` as a new version of a user message and stream its reply; the earlier version and all that
        followed it stay a branch. False if not possible."""
        if self.engine is None or self.conv is None or self.busy or message.role != "user" or not text.strip():
            return False
        _path, i = self._path_index(message)
        if i is None or self.store.branch_from(message.id, text.strip()) is None:
            return False
        self._render(i)
        self._at_bottom = True
        self._generate(self.store.active_path(self.conv.id))
        return True

    def switch_branch(self, message: Message, step: int) -> None:
        """Show the previous (-1) or next (+1) version of a message, with the continuation last used below it."""
        if self.conv is None or self.busy:
            return
        _path, i = self._path_index(message)
        if i is not None and self.store.switch(message.id, step) is not None:
            self._render(i)

    def _generate(self, history: list[Message]) -> None:
        """Stream a reply to `history` (a prefix of the active path); it is saved after history's last message."""
        assert self.engine is not None and self.conv is not None
        try:
            request = build_request(self.conv, history)
        except Exception as e:  # bad settings (e.g. out-of-range values from an old row)
            self._show_error(f"Invalid chat settings: {e}")
            return
        bridge = GenerationBridge(self.engine, request, self)
        reply = _Reply(self.conv.id, bridge, history[-1].id if history else None)
        reply.widget = self._add_bubble(None, "assistant")
        reply.widget.body.setPlainText("…")
        self.reply = reply
        bridge.finished.connect(self._on_finished)
        self._update_controls()
        self.render_timer.start()
        bridge.start()
        self.reply_started.emit()

    def stop(self) -> None:
        if self.reply is not None:
            self.reply.stop_requested = True
            self.reply.bridge.cancel()

    def _take_events(self, r: _Reply) -> None:
        """Move what the engine delivered since the last tick into the reply (one batch per redraw tick)."""
        events = r.bridge.take()
        if not events:
            return
        r.text += "".join(ev.text for ev in events)
        r.segments.extend((ev.text, ev.drafted, ev.n_tokens) for ev in events)
        r.dirty = True
        for ev in events:
            self.text_received.emit(ev.text)

    def _render_stream(self) -> None:
        r = self.reply
        if r is None:
            return
        self._take_events(r)
        if not r.dirty or r.widget is None:
            return
        r.dirty = False
        if self.highlight.isChecked():
            r.widget.set_text(r.text or "…", r.segments)
        else:
            r.widget.stream_text(r.text, r.segments)

    def _on_finished(self) -> None:
        r = self.reply
        if r is None:
            return
        self._take_events(r)
        r.summary, r.error = r.bridge.summary, r.bridge.error
        self.reply = None
        self._last_bridge = r.bridge
        self.render_timer.stop()
        saved: Message | None = None
        if r.summary is not None and (r.summary.text or r.summary.finish_reason != "cancelled"):
            stats = reply_stats(r.summary, r.bridge.ttft)
            # Keep the draft provenance so "Highlight drafted tokens" also works for past replies.
            stats["segments"] = [list(s) for s in r.segments]
            saved = self.store.add_child(r.conversation_id, r.parent_id, "assistant", r.summary.text, stats)
        if r.widget is not None:
            if saved is not None:
                r.widget.message = saved
                r.widget.set_text(saved.content, r.segments if self.highlight.isChecked() else None, r.segments)
                r.widget.set_stats(saved.stats or {})
                r.widget.branch.set_position(*branches.positions(self.store.siblings(saved.id))[saved.id])
            else:  # nothing to keep: show the path again (a regenerated reply's earlier version comes back)
                self._render(self.bubbles().index(r.widget))
        if r.error and not r.stop_requested:
            self._show_error(r.error)
            self.reply_failed.emit(r.error)
        self.conversations.reload()
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
