"""The Models panel: catalog families and builds, Hub search, models on disk, and downloads with progress."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.engine.cache_usage import DEFAULT_TOTAL_MIB, enforce_total
from app.engine.cache_usage import clear as clear_prompt_caches
from app.engine.cache_usage import folders as prompt_caches
from app.gui.bridge import BackgroundCall
from app.gui.hub_search import HubSearch, one_line
from app.gui.hub_search import size_text as _size
from app.gui.panel_support import ProgressRelay
from app.models import catalog as model_catalog
from app.models import download_progress as downloads
from app.models import local as local_models
from app.paths import get_paths


class ModelsPanel(QWidget):
    """Catalog families and builds with badges, a Hub search with REPO:FILE downloads, models already on disk, and
    downloads (catalog or Hub, one at a time) with progress, cancel and resume."""

    load_requested = Signal(str)  # a local GGUF path to load
    cache_cap_changed = Signal(int)  # the prompt cache's total cap, MiB (the main window keeps it)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.catalog: Any = None
        self._call: BackgroundCall | None = None
        self._cancel: Any = None
        self._relay = ProgressRelay(self)
        self._relay.progress.connect(self._on_progress)

        lay = QVBoxLayout(self)
        self.sources = QTabWidget()
        self.sources.addTab(self._build_catalog_page(), "Catalog")
        self.hub = HubSearch()
        self.hub.pull_requested.connect(self.download_spec)
        self.sources.addTab(self.hub, "Hugging Face Hub")
        lay.addWidget(self.sources, 2)
        self.cancel_btn = QPushButton("Cancel download")
        self.cancel_btn.clicked.connect(self.cancel_download)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.setVisible(False)
        self.dl_status = QLabel("")
        self.dl_status.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.cancel_btn)
        row.addWidget(self.progress, 1)
        lay.addLayout(row)
        lay.addWidget(self.dl_status)

        lay.addWidget(QLabel(f"<b>On this computer</b> ({get_paths().models})"))
        self.local = QTreeWidget()
        self.local.setHeaderLabels(["File", "Format", "Size", "Status"])
        self.local.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.local.itemDoubleClicked.connect(lambda it, _c: self._load_item(it))
        lay.addWidget(self.local, 1)
        lrow = QHBoxLayout()
        self.load_btn = QPushButton("Load selected")
        self.load_btn.clicked.connect(lambda: self._load_item(self.local.currentItem()))
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        lrow.addWidget(self.load_btn)
        lrow.addWidget(refresh)
        lrow.addStretch(1)
        lay.addLayout(lrow)
        lay.addLayout(self._build_prompt_cache_row())
        self._loaded = False
        self._sync()

    def _build_catalog_page(self) -> QWidget:
        """The catalog's families and builds, with the button that downloads the selected build."""
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.addWidget(
            QLabel("<b>Catalog</b>: models known to work with DynaDraft, with the draft that pairs with each.")
        )
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Model / build", "Format", "Size", "Badges"])
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.tree.itemSelectionChanged.connect(self._sync)
        lay.addWidget(self.tree, 1)
        self.download_btn = QPushButton("Download selected")
        self.download_btn.clicked.connect(self.download_selected)
        row = QHBoxLayout()
        row.addWidget(self.download_btn)
        row.addStretch(1)
        lay.addLayout(row)
        return page

    def _build_prompt_cache_row(self) -> QHBoxLayout:
        """What the conversation caches of every model hold on disk, their total cap, and a Clear button."""
        self.cache_status = QLabel("")
        self.cache_cap = QDoubleSpinBox()
        self.cache_cap.setRange(0.0, 1024.0)
        self.cache_cap.setDecimals(2)
        self.cache_cap.setSuffix(" GiB")
        self.cache_cap.setValue(DEFAULT_TOTAL_MIB / 1024)
        self.cache_cap.setToolTip("The most all models' saved conversations may take; the least recently used go first")
        self.cache_cap.editingFinished.connect(self._apply_cache_cap)
        self.cache_clear_btn = QPushButton("Clear prompt cache")
        self.cache_clear_btn.setToolTip("Remove every model's saved conversation states (the loaded model saves again)")
        self.cache_clear_btn.clicked.connect(self.clear_prompt_cache)
        row = QHBoxLayout()
        row.addWidget(self.cache_status, 1)
        row.addWidget(QLabel("at most"))
        row.addWidget(self.cache_cap)
        row.addWidget(self.cache_clear_btn)
        return row

    @property
    def cache_cap_mib(self) -> int:
        return round(self.cache_cap.value() * 1024)

    def set_cache_cap_mib(self, mib: int) -> None:
        self.cache_cap.setValue(mib / 1024)

    def _apply_cache_cap(self) -> None:
        enforce_total(get_paths().prompt_cache, self.cache_cap_mib * 1024 * 1024)
        self.cache_cap_changed.emit(self.cache_cap_mib)
        self._fill_prompt_cache()

    def clear_prompt_cache(self) -> None:
        clear_prompt_caches(get_paths().prompt_cache)
        self._fill_prompt_cache()

    def _fill_prompt_cache(self) -> None:
        present = prompt_caches(get_paths().prompt_cache)
        total = sum(f.size for f in present)
        setups = f"{len(present)} model setup" + ("" if len(present) == 1 else "s")
        self.cache_status.setText(f"<b>Prompt cache on disk</b>: {setups}, {_size(total)}")
        self.cache_clear_btn.setEnabled(bool(present))

    def showEvent(self, e: Any) -> None:  # noqa: N802 - Qt API
        # Reading the catalog and GGUF headers is cheap but not free: only when the panel is first shown.
        if not self._loaded:
            self._loaded = True
            QTimer.singleShot(0, self.refresh)
        super().showEvent(e)

    def refresh(self) -> None:
        self._fill_catalog()
        self._fill_local()
        self._fill_prompt_cache()

    def _fill_catalog(self) -> None:
        self.tree.clear()
        try:
            self.catalog = model_catalog.load_catalog()
        except Exception as e:
            self.tree.addTopLevelItem(QTreeWidgetItem([f"catalog unreadable: {e}"]))
            return
        for fam in self.catalog.families.values():
            draft = fam.draft
            fam_badges = []
            if draft is not None:
                fam_badges.append(f"draft: {draft.kind}" + (f" {draft.build}" if draft.build else ""))
            if fam.context_length:
                fam_badges.append(f"ctx {fam.context_length // 1024}k")
            top = QTreeWidgetItem([fam.name, fam.architecture or "", "", " · ".join(fam_badges)])
            for b in fam.builds:
                badges = []
                if b.verified:
                    badges.append("✔ verified")
                if b.needs_fork:
                    badges.append(f"needs {b.runtime} runtime: {b.runtime_hint}")
                if b.source == "packaged":
                    badges.append("packaged")
                if b.note:
                    badges.append(b.note)
                child = QTreeWidgetItem([b.id, b.format, _size(b.size), " · ".join(badges)])
                child.setData(0, Qt.ItemDataRole.UserRole, b.id)
                child.setToolTip(3, " · ".join(badges))
                top.addChild(child)
            self.tree.addTopLevelItem(top)
            top.setExpanded(True)

    def _fill_local(self) -> None:
        self.local.clear()
        try:
            models = local_models.list_local_models(catalog=self.catalog)
        except Exception as e:
            self.local.addTopLevelItem(QTreeWidgetItem([f"could not list models: {e}"]))
            return
        for m in models:
            r = m.report
            status = ("✔ " if m.verified else "⚠ ") + local_models.integrity_label(m)
            compat = getattr(m, "compat", None)
            if compat is not None and not compat.loads:
                status = (status + " · " if status else "") + compat.message
            it = QTreeWidgetItem(
                [str(m.path.name), getattr(r, "format", "") or "", _size(getattr(r, "file_size", None)), status]
            )
            it.setData(0, Qt.ItemDataRole.UserRole, str(m.path))
            it.setToolTip(0, str(m.path))
            it.setToolTip(3, status)
            if not m.verified:
                it.setForeground(3, QBrush(QColor("#b00020" if m.error else "#b35c00")))
            self.local.addTopLevelItem(it)
        if self.local.topLevelItemCount() == 0:
            self.local.addTopLevelItem(QTreeWidgetItem(["No models downloaded yet."]))

    def _load_item(self, it: QTreeWidgetItem | None) -> None:
        path = it.data(0, Qt.ItemDataRole.UserRole) if it is not None else None
        if path:
            self.load_requested.emit(str(path))

    def _selected_build(self) -> str | None:
        it = self.tree.currentItem()
        return it.data(0, Qt.ItemDataRole.UserRole) if it is not None else None

    def _sync(self) -> None:
        downloading = self._call is not None
        self.download_btn.setEnabled(not downloading and self._selected_build() is not None)
        self.cancel_btn.setEnabled(downloading)
        self.cancel_btn.setVisible(downloading)
        self.hub.set_downloading(downloading)

    def download_selected(self) -> None:
        build_id = self._selected_build()
        if build_id is None or self.catalog is None or self._call is not None:
            return
        self._start_download(model_catalog.parse_pull_spec(build_id, self.catalog), build_id)

    def download_spec(self, text: str) -> None:
        """Download what `dynadraft pull TEXT` would (REPO:FILE, REPO:QUANT_TAG or a catalog id), same checks."""
        if self._call is not None:
            return
        try:
            catalog = self.catalog if self.catalog is not None else model_catalog.load_catalog()
            spec = model_catalog.parse_pull_spec(text, catalog)
        except (model_catalog.CatalogError, OSError, ValueError) as e:
            self.dl_status.setText(one_line(f"Cannot download {text!r}: {e}"))
            return
        self._start_download(spec, text.strip())

    def _start_download(self, spec: model_catalog.PullSpec, label: str) -> None:
        """Pull on a background thread: the name checks, resume, disk and sha256 checks are local_models.pull's."""
        cancel = downloads.CancelToken()
        self._cancel = cancel
        relay = self._relay
        pull = local_models.pull
        self._call = BackgroundCall(
            lambda: pull(spec, progress=relay.progress.emit, cancel=cancel), "dynadraft-dl", self
        )
        self._call.succeeded.connect(self._done)
        self._call.failed.connect(self._failed)
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)
        self.dl_status.setText(f"Downloading {label}…")
        self.dl_status.setToolTip("")
        self._call.start()
        self._sync()

    def cancel_download(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()

    def _on_progress(self, p: Any) -> None:
        total = p.overall_total or 0
        if total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * p.overall_downloaded / total))
        eta = f", {p.eta:.0f} s left" if p.eta else ""
        self.progress.setFormat(f"{p.phase} {p.filename} ({p.file_index}/{p.file_count}) {p.speed / 1e6:.1f} MB/s{eta}")

    def _done(self, result: Any) -> None:
        self._call = None
        self.progress.setVisible(False)
        path = getattr(result, "path", None)
        unverified = "" if getattr(result, "verified", True) else " (NOT VERIFIED: no known sha256 to check it against)"
        self.dl_status.setText((f"Downloaded: {path}" if path else "Download finished.") + unverified)
        self._fill_local()
        self._sync()

    def _failed(self, message: str) -> None:
        self._call = None
        self.progress.setVisible(False)
        if self._cancel is not None and self._cancel.cancelled:  # the CLI's message says `pull`; here it is a button
            self.dl_status.setText("Download cancelled: the partial file is kept; download it again to resume.")
        else:
            self.dl_status.setText(one_line(f"Download failed: {message}"))
        self.dl_status.setToolTip(message)
        self._sync()
