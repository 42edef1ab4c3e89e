"""What the Models and Calibration panels share: guarded imports, a 'not available' label, a progress relay."""

from __future__ import annotations

import importlib
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QLabel,
)


def try_import(name: str) -> tuple[Any, str | None]:
    try:
        return importlib.import_module(name), None
    except Exception as e:  # ImportError, or a module still being written
        return None, f"{type(e).__name__}: {e}"


def not_available(what: str, why: str | None) -> QLabel:
    label = QLabel(f"{what} is not available in this build." + (f"\n({why})" if why else ""))
    label.setWordWrap(True)
    label.setStyleSheet("color: #8a6d3b; font-weight: bold; padding: 8px;")
    return label


class ProgressRelay(QObject):
    """Carries download progress from the download thread to the GUI thread (queued signal)."""

    progress = Signal(object)
