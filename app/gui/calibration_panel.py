"""The Calibration panel: the quick Dynamic Draft sweep, its static-vs-DD table and frontier plot."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui.bridge import BackgroundCall
from app.gui.panel_support import ProgressRelay

if TYPE_CHECKING:  # the engine (and llama.cpp) is imported only where a model is loaded
    from app.engine.runtime import Runtime
    from app.engine.worker import Engine
    from app.policy.table import FrontierTable


class CalibrationPanel(QWidget):
    """ "Calibrate this device": the quick Dynamic Draft sweep with progress, ETA and Cancel; the static-vs-DD table,
    a frontier plot (tok/s vs context per setting, DD's choice marked) and which table is active.

    `runner(engine, progress_cb, cancel_event) -> Result` defaults to `app.calibration.quick.run_quick`.
    """

    finished = Signal(object)

    def __init__(
        self, runner: Callable[..., Any] | None = None, parent: QWidget | None = None, settings: Any = None
    ) -> None:
        super().__init__(parent)
        self.engine: Engine | None = None
        self.runner = runner
        self.settings = settings  # a QSettings for the DD toggles (None: not remembered)
        if self.runner is None:
            from app.calibration.quick import run_quick  # loads the engine (llama.cpp) only with this panel

            self.runner = run_quick
        self._call: BackgroundCall | None = None
        self._cancel: threading.Event | None = None
        self._relay = ProgressRelay(self)
        intro = QLabel(
            "Dynamic Draft picks speculative-decoding settings per request from a table measured on <i>this</i> "
            "device. Calibrating runs a short sweep of draft settings on the loaded model(s) and saves the table."
        )
        intro.setWordWrap(True)
        self.table_status = QLabel("")
        self.table_status.setWordWrap(True)
        self.button = QPushButton("Calibrate this device (quick)")
        self.button.clicked.connect(lambda: self.start())
        self.file_btn = QPushButton("On a file…")
        self.file_btn.setToolTip("Calibrate on your own kind of text: prompts are cut from a text file you choose")
        self.file_btn.clicked.connect(self.start_on_file)
        self.chats_btn = QPushButton("On my recent chats")
        self.chats_btn.setToolTip("Calibrate on the text of your recent conversations (it stays on this machine)")
        self.chats_btn.clicked.connect(self.start_on_chats)
        self.recent_text: Callable[[], str] | None = None  # set by the window: the recent chats' text
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.cancel)
        self.cancel_btn.setVisible(False)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.dd_on = QCheckBox("Dynamic Draft")
        self.dd_on.setToolTip("Choose draft settings per request from the calibrated table (off: the default runs)")
        self.dd_force = QCheckBox("Force mode")
        self.dd_force.setToolTip(
            "Dynamic Draft's choice wins over a request's speculative fields (the endpoint's clients, say)"
        )
        self.dd_on.setChecked(self._setting("dd/enabled", True))
        self.dd_force.setChecked(self._setting("dd/force", False))
        self.dd_on.toggled.connect(self.apply_dd_toggles)
        self.dd_force.toggled.connect(self.apply_dd_toggles)
        self._build_report()
        self._relay.progress.connect(self._on_progress)
        row = QHBoxLayout()
        row.addWidget(self.button)
        row.addWidget(self.file_btn)
        row.addWidget(self.chats_btn)
        row.addWidget(self.cancel_btn)
        row.addStretch(1)
        row.addWidget(self.dd_on)
        row.addWidget(self.dd_force)
        lay = QVBoxLayout(self)
        lay.addWidget(intro)
        lay.addWidget(self.table_status)
        lay.addLayout(row)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.report, 1)
        lay.addWidget(self.best_static)
        lay.addWidget(self.plot, 2)
        self._sync()

    def _build_report(self) -> None:
        """The report table (the policy's columns), the best static setting's line and the frontier plot."""
        self.report = QTableWidget(0, 6)
        from app.policy.report import COLUMNS

        self.report.setHorizontalHeaderLabels(list(COLUMNS))
        header = self.report.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # headers are never cut off
        header.setStretchLastSection(True)
        self.report.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.best_static = QLabel("")
        self.best_static.setWordWrap(True)
        self.plot = pg.PlotWidget(title="Frontier: generation tok/s by prompt length")
        self.plot.setLabel("bottom", "prompt tokens (log)")
        self.plot.setLabel("left", "tok/s")
        self.plot.setLogMode(x=True, y=False)
        self.plot.addLegend(offset=(10, 10))

    def _setting(self, key: str, default: bool) -> bool:
        v = self.settings.value(key, default) if self.settings is not None else default
        return v is True or (isinstance(v, str) and v.lower() == "true")

    def set_engine(self, engine: Any) -> None:
        self.engine = engine
        self._sync()
        self.refresh_table_status()

    def apply_dd_toggles(self) -> None:
        """Give the engine the DD on/off and force switches (and remember them); the status line follows."""
        on, force = self.dd_on.isChecked(), self.dd_force.isChecked()
        self.dd_force.setEnabled(on)
        if self.settings is not None:
            self.settings.setValue("dd/enabled", on)
            self.settings.setValue("dd/force", force)
        if self.engine is None or not hasattr(self.engine, "set_dd_options"):
            return
        engine = self.engine
        call = BackgroundCall(lambda: engine.set_dd_options(on, force, timeout=30), "dynadraft-dd-toggle", self)
        call.succeeded.connect(lambda _text: self.refresh_table_status())
        call.start()
        self._toggle_call = call  # keep a reference until it reports

    def refresh_table_status(self) -> None:
        """Show which table is active for the loaded pair (id, date, fingerprint) or why none applies."""
        if self.engine is None:
            self.table_status.setText("")
            return

        def describe(session: Runtime) -> tuple[str, FrontierTable | None, bool]:
            pol = session.policy
            if pol.table is not None:
                t = pol.table
                fp = t.fingerprint
                off = "" if pol.enabled else " Dynamic Draft is switched off."
                text = (
                    f"Active table {t.table_id} from {t.created_at}: {fp.backend} · {fp.device}, "
                    f"{fp.n_threads} threads, flash attention {fp.flash_attn}, {len(t.rows)} rows"
                    + (f" (measured: {t.notes})" if t.notes else "")
                    + f".{off}"
                )
                return text, t, False
            if pol.unavailable == "stale_table":
                why = session.dd_status.split(": dynadraft calibrate")[0]
                return (
                    f"⚠ The saved table does not apply to these settings ({why}). Recalibrate with the button "
                    "below, or load the model with the settings it was calibrated with.",
                    None,
                    True,
                )
            return "No calibration table for this model yet: Dynamic Draft runs the default setting.", None, False

        engine = self.engine
        call = BackgroundCall(lambda: engine.call(describe), "dynadraft-dd-status", self)
        call.succeeded.connect(self._show_status)
        call.start()
        self._status_call = call  # keep a reference until it reports

    def _show_status(self, status: Any) -> None:
        text, table, stale = status
        self.table_status.setText(str(text))
        self.button.setText("Recalibrate for these settings (quick)" if stale else "Calibrate this device (quick)")
        if table is not None:
            self.show_table(table)

    def _sync(self) -> None:
        running = self._call is not None
        can = self.runner is not None and self.engine is not None and not running
        self.button.setEnabled(can)
        self.file_btn.setEnabled(can)
        self.chats_btn.setEnabled(can and self.recent_text is not None)
        self.cancel_btn.setVisible(running)
        self.progress.setVisible(running)
        hint = "Load a model (and ideally its draft) to calibrate."
        if self.runner is not None and self.engine is None:
            self.status.setText(hint)
        elif self.status.text() == hint:
            self.status.setText("")

    def start_on_file(self) -> None:
        from PySide6.QtWidgets import QFileDialog

        path, _ = QFileDialog.getOpenFileName(self, "Calibrate on a text file", "", "Text (*.txt *.md *.py);;All (*)")
        if path:
            self.start_on_text_file(path)

    def start_on_text_file(self, path: str) -> None:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            self.status.setText(f"Cannot read {path}: {e.strerror or e}")
            return
        self.start(text, f"on {Path(path).name}")

    def start_on_chats(self) -> None:
        self.start(self.recent_text() if self.recent_text else "", "on your recent chats")

    def start(self, corpus: str | None = None, what: str = "") -> None:
        """Run the quick calibration; `corpus` is the user's own text to cut prompts from (None: the shipped one)."""
        if self.runner is None or self.engine is None or self._call is not None:
            return
        changes: dict[str, Any] = {}
        if corpus is not None:
            from app.calibration.runner import check_corpus
            from app.policy.content_class import content_class

            try:
                changes["corpus"] = check_corpus(corpus)
            except ValueError as e:
                self.status.setText(f"Cannot calibrate {what}: {e}")
                return
            # Your text fills the class it falls in (the same detector that classifies requests); the other
            # classes keep the shipped sections.
            changes["corpus_class"] = content_class(changes["corpus"])
            what += f" (your text fills the {changes['corpus_class']} class)"
        runner, engine, relay = self.runner, self.engine, self._relay
        cancel = self._cancel = threading.Event()
        self._call = BackgroundCall(
            lambda: runner(engine, relay.progress.emit, cancel, **changes), "dynadraft-calibrate", self
        )
        self._call.succeeded.connect(self._done)
        self._call.failed.connect(self._failed)
        self.progress.setRange(0, 0)
        self.status.setText(
            f"Calibrating {what}… the chat stays usable but replies wait for the engine.".replace("  ", " ")
        )
        self._call.start()
        self._sync()

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
            self.status.setText("Cancelling after the current run… the previous table stays active.")

    def _on_progress(self, p: Any) -> None:
        if hasattr(p, "done"):
            self.progress.setRange(0, max(1, p.total))
            self.progress.setValue(min(p.done, p.total))
            self.status.setText(f"{p.message} — run {p.done} of ~{p.total}, about {p.eta_s:.0f} s left")
        else:
            self.status.setText(str(p))

    def _done(self, result: Any) -> None:
        self._call = None
        self._cancel = None
        self._sync()
        if result is None or not hasattr(result, "table"):
            self.status.setText("Calibration finished.")
        else:
            self.show_result(result)
            self.status.setText(
                f"Calibration finished in {result.wall_s:.0f} s; table saved and active."
                + (f" Contexts skipped for time: {result.skipped_contexts}." if result.skipped_contexts else "")
                + (
                    f" Class prompts skipped for time: {result.skipped_classes} (a class with none measured uses"
                    " the context rows)."
                    if getattr(result, "skipped_classes", None)
                    else ""
                )
            )
        self.refresh_table_status()
        self.finished.emit(result)

    def _failed(self, message: str) -> None:
        self._call = None
        self._cancel = None
        self._sync()
        cancelled = "Cancelled" in message or not message
        self.status.setText(
            "Calibration cancelled; the previous table is unchanged." if cancelled else f"Calibration failed: {message}"
        )

    def show_result(self, result: Any) -> None:
        """Fill the static-vs-DD table and the frontier plot from a calibration result."""
        self.show_table(result.table)

    def show_table(self, table: Any) -> None:
        """The CLI report's rows (static = the fixed n2,p0 baseline when the table has draft rows), the best
        static setting below it, and the frontier plot."""
        from app.calibration.runner import report_rows
        from app.policy.frontier import frontier_choices
        from app.policy.report import display_cells, display_columns, has_classes, has_held_out

        rows = report_rows(table)
        columns = display_columns(rows)  # a leading Class column with class rows, a trailing Held-out one
        self.report.setColumnCount(len(columns))
        self.report.setHorizontalHeaderLabels(list(columns))
        self.report.setRowCount(len(rows))
        with_class, with_held_out = has_classes(rows), has_held_out(rows)
        for i, r in enumerate(rows):
            for j, text in enumerate(display_cells(r, with_class, with_held_out)):
                self.report.setItem(i, j, QTableWidgetItem(text))
        static, _ = frontier_choices(table)
        fixed = rows[0].static_setting.label() if rows else "–"
        self.best_static.setText(
            f"Static fixed setting (the baseline the gain is measured against): {fixed}. "
            + (
                f"Best static setting over all calibrated contexts: {static.setting.label()} "
                "(what Dynamic Draft falls back to)."
                if static is not None
                else ""
            )
        )
        self.plot.clear()
        by_setting: dict[str, list[tuple[float, float]]] = {}
        for row in table.context_rows:  # the main frontier; class rows are in the table above
            if row.safe:
                x = float(row.prompt_tokens or max(1, (row.ctx_lo + row.ctx_hi) // 2))
                by_setting.setdefault(row.setting.label(), []).append((x, row.median_tps))
        for k, (label, pts) in enumerate(sorted(by_setting.items())):
            pts.sort()
            pen = pg.mkPen(pg.intColor(k, hues=max(8, len(by_setting))), width=1)
            self.plot.plot([p[0] for p in pts], [p[1] for p in pts], pen=pen, symbol="o", symbolSize=4, name=label)
        where = {(r.ctx_lo, r.ctx_hi): float(r.prompt_tokens or 1) for r in table.context_rows}
        chosen = [
            (where[(r.ctx_lo, r.ctx_hi)], r.dd_tps) for r in rows if r.dd_tps is not None and r.content_class is None
        ]
        self.plot.plot(
            [c[0] for c in chosen],
            [c[1] for c in chosen],
            pen=None,
            symbol="star",
            symbolSize=14,
            symbolBrush="w",
            name="DD choice",
        )
