"""A probe for the Qt binding's reference-counting bug that crashes the app (PySide6 6.12.0 on Python 3.11)."""

from __future__ import annotations

import sys

from PySide6.QtCore import QRectF
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsItem, QGraphicsObject, QGraphicsScene, QStyleOptionGraphicsItem, QWidget

# PySide6 6.12.0 drops one reference to None on every call of a Python itemChange() override. pyqtgraph overrides
# it in every plot item, so each redraw of the live graphs takes references from None until its count reaches zero
# and the interpreter aborts ("none_dealloc" / "bool_dealloc", or a segfault inside a garbage collection), at the
# latest when the app exits. 6.11.3 does not. Python 3.12+ makes None immortal, so the lost references are harmless
# there and this probe finds nothing.
PROBE_CALLS = 200


class _Probe(QGraphicsObject):
    def boundingRect(self) -> QRectF:
        return QRectF(0, 0, 1, 1)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        pass

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: object) -> object:
        return super().itemChange(change, value)


def binding_refcount_problem() -> str | None:
    """None when the binding keeps reference counts; else what is wrong and the fix (needs a QApplication)."""
    import PySide6

    scene = QGraphicsScene()
    item = _Probe()
    scene.addItem(item)
    before = sys.getrefcount(None)
    for i in range(PROBE_CALLS):
        item.setVisible(i % 2 == 1)  # two itemChange calls each (about to change, has changed)
    lost = before - sys.getrefcount(None)
    scene.removeItem(item)
    # Some references to None come and go with ordinary work; a binding that loses them loses one per call or more.
    if lost < PROBE_CALLS // 2:
        return None
    return (
        f"PySide6 {PySide6.__version__} loses references to None in QGraphicsItem.itemChange overrides "
        f"({lost} in {2 * PROBE_CALLS} calls); the live graphs make such calls on every redraw, so Python aborts "
        "after a while or at exit. Install another version: pip install 'pyside6-essentials!=6.12.0' "
        "(scripts/setup.sh does)."
    )
