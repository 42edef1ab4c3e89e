"""The conversation list: search, New, and rename / delete from a context menu."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.gui.store import ChatStore


class ConversationList(QWidget):
    """Search box, New button and the conversations (newest first); right-click to rename, export or delete."""

    selected = Signal(int)
    new_requested = Signal()
    rename_requested = Signal(int)
    delete_requested = Signal(int)
    export_requested = Signal(int)

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
        menu.addAction("Export…", lambda: self.export_requested.emit(cid))
        menu.addAction("Delete", lambda: self.delete_requested.emit(cid))
        menu.exec(self.list.mapToGlobal(pos))
