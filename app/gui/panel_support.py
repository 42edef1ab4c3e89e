"""What the Models and Calibration panels share: a progress relay."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal


class ProgressRelay(QObject):
    """Carries download progress from the download thread to the GUI thread (queued signal)."""

    progress = Signal(object)
