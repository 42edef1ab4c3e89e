"""The Models tab's Hub box: search GGUF repos, list a repo's GGUF files, and ask for a REPO:FILE download."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui.bridge import BackgroundCall

SPEC_ROLE = Qt.ItemDataRole.UserRole  # what a result row puts in the REPO:FILE field
REPO_ROLE = Qt.ItemDataRole.UserRole + 1  # a repo row's id, so expanding it can list its files
MAX_MESSAGE = 300


def one_line(message: str) -> str:
    """A message for a one-line status label: whitespace (newlines included) folded, long ones cut."""
    text = " ".join(message.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def size_text(n: int | None) -> str:
    if not n:
        return "?"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)


class HubSearch(QWidget):
    """A search box over the Hugging Face Hub's GGUF repos, their files, and a REPO:FILE field with Download.

    Every Hub call runs on a background thread (as the catalog downloads do); errors come back as one line."""

    pull_requested = Signal(str)  # the REPO:FILE (or REPO:QUANT_TAG, or catalog id) text to download

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # Calls have no parent and report to bound slots: a widget deleted before an answer drops the connection.
        self._search_call: BackgroundCall | None = None  # only the latest search may fill the list
        self._searched_for = ""
        self._listing: dict[str, BackgroundCall] = {}  # repo -> its file listing in flight
        self.query = QLineEdit()
        self.query.setPlaceholderText("Search the Hugging Face Hub for GGUF models (e.g. a model name)")
        self.query.returnPressed.connect(self.search)
        self.search_btn = QPushButton("Search")
        self.search_btn.clicked.connect(self.search)
        self.results = QTreeWidget()
        self.results.setHeaderLabels(["Repository / file", "Size", "Downloads"])
        self.results.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.results.itemExpanded.connect(self._expanded)
        self.results.currentItemChanged.connect(self._picked)
        self.spec = QLineEdit()
        self.spec.setPlaceholderText("OWNER/REPO:FILE.gguf (or OWNER/REPO:QUANT_TAG), or pick a file above")
        self.spec.returnPressed.connect(self._request)
        self.pull_btn = QPushButton("Download")
        self.pull_btn.clicked.connect(self._request)
        self.status = QLabel("")
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        top = QHBoxLayout()
        top.addWidget(self.query, 1)
        top.addWidget(self.search_btn)
        bottom = QHBoxLayout()
        bottom.addWidget(self.spec, 1)
        bottom.addWidget(self.pull_btn)
        lay = QVBoxLayout(self)
        about = QLabel(
            "<b>Hugging Face Hub</b>: any GGUF repository. Downloads get the catalog's checks: safe file names, "
            "resume after a cancel, and a sha256 check where the Hub gives one."
        )
        about.setWordWrap(True)
        lay.addWidget(about)
        lay.addLayout(top)
        lay.addWidget(self.results, 1)
        lay.addWidget(self.status)
        lay.addLayout(bottom)

    def set_downloading(self, busy: bool) -> None:
        """One download at a time, shared with the catalog's: the Download button waits for it."""
        self.pull_btn.setEnabled(not busy)

    def say(self, message: str) -> None:
        self.status.setText(one_line(message))
        self.status.setToolTip(message)

    def search(self) -> None:
        from app.models.hub import search_hub

        query = self.query.text().strip()
        if not query:
            self.say("Type what to search for (part of a repository name).")
            return
        self.say(f"Searching the Hub for {query!r}…")
        self._searched_for = query
        call = BackgroundCall(lambda: search_hub(query), "dynadraft-hub-search")
        call.succeeded.connect(self._searched)
        call.failed.connect(self._search_failed)
        self._search_call = call.start()

    def _searched(self, hits: list[Any]) -> None:
        if self.sender() is not self._search_call:
            return  # a later search is under way
        query = self._searched_for
        self.results.clear()
        for h in hits:
            downloads = f"{h.downloads or 0:,}" + (" (gated)" if h.gated else "")
            it = QTreeWidgetItem([h.id, "", downloads])
            it.setData(0, SPEC_ROLE, f"{h.id}:")
            it.setData(0, REPO_ROLE, h.id)
            it.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)
            it.setToolTip(0, "Expand to list its GGUF files")
            self.results.addTopLevelItem(it)
        n = len(hits)
        self.say(f"{n} GGUF repositor{'y' if n == 1 else 'ies'} for {query!r}; expand one to list its files.")

    def _search_failed(self, message: str) -> None:
        if self.sender() is self._search_call:
            self.say(f"Search failed: {message}")

    def _expanded(self, item: QTreeWidgetItem) -> None:
        repo = item.data(0, REPO_ROLE)
        if not repo or item.childCount() or repo in self._listing:
            return
        from app.models.hub import repo_ggufs

        self.say(f"Listing the GGUF files of {repo}…")
        call = BackgroundCall(lambda: repo_ggufs(repo), "dynadraft-hub-files")
        call.succeeded.connect(self._listed)
        call.failed.connect(self._list_failed)
        self._listing[repo] = call.start()

    def _listing_repo(self) -> str | None:
        """The repo whose listing call sent the signal being handled (and forget that call)."""
        repo = next((r for r, call in self._listing.items() if call is self.sender()), None)
        if repo is not None:
            del self._listing[repo]
        return repo

    def _repo_item(self, repo: str) -> QTreeWidgetItem | None:
        for i in range(self.results.topLevelItemCount()):
            it = self.results.topLevelItem(i)
            if it is not None and it.data(0, REPO_ROLE) == repo:
                return it
        return None

    def _listed(self, files: list[Any]) -> None:
        repo = self._listing_repo()
        item = self._repo_item(repo) if repo else None
        if item is None or repo is None:
            return  # the results were replaced by another search meanwhile
        for f in files:
            name = f.filename + (f" ({f.shards} shards)" if f.shards > 1 else "")
            child = QTreeWidgetItem([name, size_text(f.size), ""])
            child.setData(0, SPEC_ROLE, f.spec)
            child.setToolTip(0, f.spec)
            item.addChild(child)
        if not files:
            item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.DontShowIndicator)
        n = len(files)
        self.say(f"{repo}: {n} GGUF model{'' if n == 1 else 's'}" + ("; pick one to download." if n else "."))

    def _list_failed(self, message: str) -> None:
        repo = self._listing_repo()
        item = self._repo_item(repo) if repo else None
        if item is not None:
            item.setExpanded(False)  # expanding it again tries again
        self.say(f"Could not list the files: {message}")  # the Hub's message names the repo

    def _picked(self, item: QTreeWidgetItem | None, _previous: QTreeWidgetItem | None) -> None:
        spec = item.data(0, SPEC_ROLE) if item is not None else None
        if spec:
            self.spec.setText(spec)

    def _request(self) -> None:
        text = self.spec.text().strip()
        if not text or text.endswith(":"):
            self.say("Give OWNER/REPO:FILE.gguf, or pick a file from the search results.")
            return
        if self.pull_btn.isEnabled():
            self.pull_requested.emit(text)
