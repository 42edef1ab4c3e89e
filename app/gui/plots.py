"""Live graphs of speculative decoding: rolling acceptance, draft depth per step and tokens/s (pyqtgraph)."""

from __future__ import annotations

import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.gui.live import ROLLING_STEPS, StepRing
from app.speculative import registry

REDRAW_MS = 100  # 10 fps: smooth enough to read, and far cheaper than redrawing per token
VIEW_STEPS = 512  # steps visible at once (the ring keeps more)
X_CHUNK = 64
_BOUNDARY_PEN = pg.mkPen((150, 150, 150), width=1, style=pg.QtCore.Qt.PenStyle.DashLine)
_SOURCE_COLORS = {"draft": "#9467bd", "lookup": "#17becf", "mtp": "#e377c2"}  # others: a hue by order of arrival


def source_label(name: str) -> str:
    """The registry's label for a draft source (its name when it is not registered)."""
    return registry.get(name).label if name in registry.names() else name


class LivePlots(QWidget):
    """Three stacked plots sharing the step axis, redrawn from a StepRing by a timer (only when data changed)."""

    def __init__(self, ring: StepRing | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ring = ring or StepRing()
        self.redraws = 0
        pg.setConfigOptions(antialias=False)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.view.setMinimumHeight(240)

        def plot(row: int, title: str, ylabel: str, bottom: bool = False) -> pg.PlotItem:
            p = self.view.addPlot(row=row, col=0)
            p.setTitle(title, color="#333", size="9pt")
            p.setLabel("left", ylabel, color="#333")
            # Ranges are set by `redraw` in coarse steps: with autorange every frame would rebuild the axes'
            # tick pictures, which costs far more than the curves (and holds the GIL the engine needs).
            p.disableAutoRange()
            p.setMouseEnabled(x=False, y=False)
            p.hideButtons()
            p.setMenuEnabled(False)
            p.showAxis("bottom", bottom)
            for ax in ("left", "bottom"):
                p.getAxis(ax).setPen("#666")
                p.getAxis(ax).setTextPen("#333")
            p.getAxis("left").setWidth(48)
            return p

        self.p_acc = plot(0, f"Acceptance rate (rolling {ROLLING_STEPS} steps)", "accepted")
        self.p_acc.setYRange(0, 1.05, padding=0)
        self.p_depth = plot(1, "Draft depth per step", "tokens")
        self.p_tps = plot(2, "Generation speed", "tok/s", bottom=True)
        self.p_tps.setLabel("bottom", "step (all requests; dashed lines mark where a request starts)", color="#333")
        for p in (self.p_depth, self.p_tps):
            p.setXLink(self.p_acc)
        self._x_range: tuple[float, float] = (-1.0, -1.0)
        self._depth_top = 0.0
        self._tps_top = 0.0
        self._set_x(0)
        # The legend names the all-sources line and each source's own line (added when a source first drafts).
        self.acc_legend = self.p_acc.addLegend(offset=(-4, 2), colCount=4, labelTextSize="8pt")
        self.c_acc = self.p_acc.plot(pen=pg.mkPen("#1f77b4", width=2), name="all sources", connect="finite")
        self.c_source: dict[str, pg.PlotDataItem] = {}
        self.c_depth = self.p_depth.plot(pen=pg.mkPen("#bbbbbb", width=1), name="depth allowed", connect="finite")
        self.c_drafted = self.p_depth.plot(pen=pg.mkPen("#ff7f0e", width=1), name="drafted", connect="finite")
        self.c_accepted = self.p_depth.plot(pen=pg.mkPen("#2ca02c", width=2), name="accepted", connect="finite")
        self.c_tps = self.p_tps.plot(pen=pg.mkPen("#d62728", width=2), connect="finite")
        self._lines: dict[float, list[pg.InfiniteLine]] = {}

        self.summary = QLabel("No steps yet. Send a message to see speculation live.")
        legend = QLabel(
            "<span style='color:#ff7f0e'>■</span> drafted &nbsp; <span style='color:#2ca02c'>■</span> accepted "
            "&nbsp; <span style='color:#999'>■</span> depth allowed"
        )
        clear = QPushButton("Clear")
        clear.setToolTip("Forget the plotted history")
        clear.clicked.connect(self.clear)
        self.summary.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(clear)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(legend)
        lay.addWidget(self.view, 1)

        self.timer = QTimer(self)
        self.timer.setInterval(REDRAW_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    def refresh(self) -> None:
        """Move pending steps into the ring and redraw if anything arrived (called by the timer)."""
        if self.ring.drain() == 0:
            return
        self.redraw()

    def redraw(self) -> None:
        s = self.ring.snapshot()
        if s.x.size == 0:
            for c in (self.c_acc, self.c_depth, self.c_drafted, self.c_accepted, self.c_tps, *self.c_source.values()):
                c.setData([], [])
        else:
            self.c_acc.setData(s.x, s.acceptance)
            self.c_depth.setData(s.x, s.depth)
            self.c_drafted.setData(s.x, s.drafted)
            self.c_accepted.setData(s.x, s.accepted)
            self.c_tps.setData(s.x, s.tps)
            for name, series in s.by_source.items():
                self._source_curve(name).setData(s.x, series)
            self._set_x(int(s.x[-1]) + 1)
            self._set_y(self.p_depth, "_depth_top", float(np.nanmax(s.depth)) if s.depth.size else 0.0)
            self._set_y(self.p_tps, "_tps_top", float(np.nanmax(s.tps)) if s.tps.size else 0.0)
            last_acc = s.acceptance[~np.isnan(s.acceptance)]
            acc_txt = f"{last_acc[-1]:.0%}" if last_acc.size else "—"
            self.summary.setText(
                f"Requests: {self.ring.requests} · steps: {self.ring.total_steps} · acceptance now: {acc_txt} · "
                f"speed now: {s.tps[-1]:.1f} tok/s"
            )
        self._sync_boundaries(s.boundaries)
        self.redraws += 1

    def _source_curve(self, name: str) -> pg.PlotDataItem:
        """The acceptance line of one draft source, created (and put in the legend) the first time it drafts."""
        curve = self.c_source.get(name)
        if curve is None:
            color = _SOURCE_COLORS.get(name) or pg.intColor(len(self.c_source), hues=8)
            pen = pg.mkPen(color, width=2)
            curve = self.p_acc.plot(pen=pen, name=source_label(name), connect="finite")
            self.c_source[name] = curve
        return curve

    def _set_x(self, n: int) -> None:
        """Show the last VIEW_STEPS steps; the right edge moves in chunks so the axis is rebuilt rarely."""
        hi = max(X_CHUNK, -(-n // X_CHUNK) * X_CHUNK)
        lo = max(0, hi - VIEW_STEPS)
        if (lo, hi) != self._x_range:
            self._x_range = (lo, hi)
            self.p_acc.setXRange(lo, hi, padding=0)

    def _set_y(self, plot: pg.PlotItem, attr: str, peak: float) -> None:
        """Grow (or shrink) the y range to a 'nice' ceiling only when the data leaves it."""
        top = getattr(self, attr)
        if not np.isfinite(peak):
            peak = 0.0
        if peak <= top and peak >= top * 0.3:
            return
        nice = 1.0
        while nice < peak * 1.1:
            nice *= 2.0 if str(nice)[0] in "1" else 2.5 if str(nice)[0] == "2" else 2.0
        if nice != top:
            setattr(self, attr, nice)
            plot.setYRange(0, nice, padding=0)

    def _sync_boundaries(self, boundaries: tuple[float, ...]) -> None:
        wanted = set(boundaries)
        for x in list(self._lines):
            if x not in wanted:
                for line, p in zip(self._lines.pop(x), (self.p_acc, self.p_depth, self.p_tps), strict=True):
                    p.removeItem(line)
        for x in boundaries:
            if x not in self._lines:
                lines = []
                for p in (self.p_acc, self.p_depth, self.p_tps):
                    line = pg.InfiniteLine(pos=x - 0.5, angle=90, pen=_BOUNDARY_PEN, movable=False)
                    p.addItem(line)
                    lines.append(line)
                self._lines[x] = lines

    def clear(self) -> None:
        self.ring.clear()
        self._depth_top = self._tps_top = 0.0
        self.redraw()
        self.summary.setText("Cleared.")
