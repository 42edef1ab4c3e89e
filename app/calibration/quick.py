"""One-click quick calibration for callers that hold an Engine (the GUI): runs the sweep on the engine thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.calibration.calibrate import calibrate
from app.calibration.runner import Progress, Result
from app.engine.worker import Engine


def run_quick(
    engine: Engine,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    **plan_changes: object,
) -> Result:
    """Quick calibration of the engine's loaded model (and draft); `plan_changes` shrink the grid (tests, demos).

    Blocks the calling (non-GUI) thread; generation requests queue behind it on the engine thread.
    """

    return engine.call(lambda s: calibrate(s, "quick", None, progress, cancel, **plan_changes))


__all__ = ["Progress", "Result", "run_quick"]
