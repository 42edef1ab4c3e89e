"""SIGTERM/SIGINT close the app even when they come before its event loop has started (a `kill` at start-up)."""

from __future__ import annotations

import os
import signal

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication


def test_a_signal_before_the_event_loop_starts_still_quits(qapp: QApplication) -> None:
    from app.gui.main import quit_on_signals

    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    timer = quit_on_signals(qapp)
    try:
        # Delivered now, before exec(): the handler runs at once, while no event loop runs, where quit() alone is
        # lost (this is how `dynadraft` hung when killed right after its window was mapped).
        os.kill(os.getpid(), signal.SIGTERM)
        fallback: list[bool] = []
        guard = QTimer()
        guard.setSingleShot(True)
        guard.timeout.connect(lambda: (fallback.append(True), qapp.quit()))
        guard.start(15_000)
        qapp.exec()
        guard.stop()  # it must not fire later, inside another test's event loop
        assert not fallback, "the signal was lost: the event loop ran until the test's own 15 s fallback"
    finally:
        timer.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
