"""The Calibration panel: the quick Dynamic Draft sweep, its static-vs-DD table and frontier plot."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
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


class CalibrationPanel(QWidget):
    """ "Calibrate this device": the quick Dynamic Draft sweep with progress, ETA and Cancel; the static-vs-DD table,
    a frontier plot (tok/s vs context per setting, DD's choice marked) and which table is active.

    `runner(engine, progress_cb, cancel_event) -> Result` defaults to `app.calibration.quick.run_quick`.
    """

    finished = Signal(object)

    def __init__(self, runner: Callable[..., Any] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.engine: Engine | None = None
        self.runner = runner
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
        self.button.clicked.connect(self.start)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.cancel)
        self.cancel_btn.setVisible(False)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.report = QTableWidget(0, 6)
        from app.policy.report import COLUMNS

        self.report.setHorizontalHeaderLabels(list(COLUMNS))
        self.report.horizontalHeader().setStretchLastSection(True)
        self.report.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.plot = pg.PlotWidget(title="Frontier: generation tok/s by prompt length")
        self.plot.setLabel("bottom", "prompt tokens (log)")
        self.plot.setLabel("left", "tok/s")
        self.plot.setLogMode(x=True, y=False)
        self.plot.addLegend(offset=(10, 10))
        self._relay.progress.connect(self._on_progress)
        row = QHBoxLayout()
        row.addWidget(self.button)
        row.addWidget(self.cancel_btn)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addWidget(intro)
        lay.addWidget(self.table_status)
        lay.addLayout(row)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.report, 1)
        lay.addWidget(self.plot, 2)
        self._sync()

    def set_engine(self, engine: Engine | None) -> None:
        self.engine = engine
        self._sync()
        self.refresh_table_status()

    def set_table_status(self, text: str) -> None:
        self.table_status.setText(text)

    def refresh_table_status(self) -> None:
        """Show which table is active for the loaded pair (id, date, fingerprint) or why none applies."""
        engine = self.engine
        if engine is None:
            self.table_status.setText("")
            return

        def describe(runtime: Runtime) -> str:
            pol = runtime.policy
            if pol.table is not None:
                t = pol.table
                fp = t.fingerprint
                return (
                    f"Active table {t.table_id} from {t.created_at}: {fp.backend} · {fp.device}, n_ctx {fp.n_ctx}, "
                    f"{fp.n_threads} threads, {len(t.rows)} rows."
                )
            if pol.unavailable == "stale_table":
                return "⚠ The saved table is stale (measured with different " + ", ".join(pol.stale_fields) + ")."
            return "No calibration table for this model yet: Dynamic Draft runs the default setting."

        call = BackgroundCall(lambda: engine.call(describe), "dynadraft-dd-status", self)
        call.succeeded.connect(lambda text: self.table_status.setText(str(text)))
        call.start()
        self._status_call = call  # keep a reference until it reports

    def _sync(self) -> None:
        running = self._call is not None
        self.button.setEnabled(self.runner is not None and self.engine is not None and not running)
        self.cancel_btn.setVisible(running)
        self.progress.setVisible(running)
        if self.runner is not None and self.engine is None:
            self.status.setText("Load a model (and ideally its draft) to calibrate.")

    def start(self) -> None:
        if self.runner is None or self.engine is None or self._call is not None:
            return
        runner, engine, relay = self.runner, self.engine, self._relay
        cancel = self._cancel = threading.Event()
        self._call = BackgroundCall(lambda: runner(engine, relay.progress.emit, cancel), "dynadraft-calibrate", self)
        self._call.succeeded.connect(self._done)
        self._call.failed.connect(self._failed)
        self.progress.setRange(0, 0)
        self.status.setText("Calibrating… the chat stays usable but replies wait for the engine.")
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
        from app.policy.report import comparison_rows, display_cells

        rows = comparison_rows(result.table)
        self.report.setRowCount(len(rows))
        for i, r in enumerate(rows):
            for j, text in enumerate(display_cells(r)):
                self.report.setItem(i, j, QTableWidgetItem(text))
        self.plot.clear()
        by_setting: dict[str, list[tuple[float, float]]] = {}
        for row in result.table.rows:
            if row.safe:
                x = float(row.prompt_tokens or max(1, (row.ctx_lo + row.ctx_hi) // 2))
                by_setting.setdefault(row.setting.label(), []).append((x, row.median_tps))
        for k, (label, pts) in enumerate(sorted(by_setting.items())):
            pts.sort()
            pen = pg.mkPen(pg.intColor(k, hues=max(8, len(by_setting))), width=1)
            self.plot.plot([p[0] for p in pts], [p[1] for p in pts], pen=pen, symbol="o", symbolSize=4, name=label)
        where = {(r.ctx_lo, r.ctx_hi): float(r.prompt_tokens or 1) for r in result.table.rows}
        chosen = [(where[(r.ctx_lo, r.ctx_hi)], r.dd_tps) for r in rows if r.dd_tps is not None]
        self.plot.plot(
            [c[0] for c in chosen],
            [c[1] for c in chosen],
            pen=None,
            symbol="star",
            symbolSize=14,
            symbolBrush="w",
            name="DD choice",
        )
