"""Calibrate whichever runtime the engine thread holds, with the sweep its way of taking settings calls for."""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.calibration.external import external_plan, run_external_calibration
from app.calibration.runner import Progress, Result, default_plan, plan_with, run_calibration
from app.engine.runtime import Runtime


def calibrate(
    runtime: Runtime,
    mode: str = "quick",
    budget_min: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    **plan_changes: object,
) -> Result:
    """The quick or full sweep of this runtime, `plan_changes` applied to its plan (the CLI's flags, tests): settings
    per request in process (the bundled runtime), else through the server, restarting it where its build needs."""
    access = runtime.sweep_access()
    if access.starts is not None:
        plan = plan_with(external_plan(runtime, mode, budget_min), **plan_changes)
        return run_external_calibration(runtime, plan, progress=progress, cancel=cancel, access=access)
    plan = plan_with(default_plan(runtime, mode, budget_min), **plan_changes)
    return run_calibration(runtime, plan, progress=progress, cancel=cancel, access=access)
