"""One-click quick calibration for callers that hold an Engine (the GUI): runs the sweep on the engine thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from app.calibration.runner import Progress, Result, default_plan, plan_with, run_calibration
from app.engine.runtime import Runtime
from app.engine.worker import Engine


def run_quick(
    engine: Engine,
    progress: Callable[[Any], None] | None = None,
    cancel: threading.Event | None = None,
    **plan_changes: Any,
) -> Result:
    """Quick calibration of the engine's loaded model (and draft); `plan_changes` shrink the grid (tests, demos).

    Blocks the calling (non-GUI) thread; generation requests queue behind it on the engine thread.
    """

    def job(runtime: Runtime) -> Result:
        plan = default_plan(runtime, "quick")
        if plan_changes:
            plan = plan_with(plan, **plan_changes)
        return run_calibration(runtime, plan, progress=progress, cancel=cancel)

    return engine.call(job)


__all__ = ["Progress", "Result", "run_quick"]
