"""`dynadraft calibrate`: run the quick or full sweep on this device, print the static-vs-DD report, save the table."""

from __future__ import annotations

import argparse
import json
import sys
import threading

from app.calibration.external import calibrate_session
from app.calibration.runner import CalibrationCancelled, Progress
from app.engine.session import config_from_args
from app.engine.types import EngineError
from app.engine.worker import Engine


def run_calibrate(args: argparse.Namespace) -> int:
    mode = "full" if args.full else "quick"
    config = config_from_args(args)
    cancel = threading.Event()

    def show(p: Progress) -> None:
        if not args.json:
            print(f"\r[{p.done:>3}/{p.total}] ETA {p.eta_s:5.0f}s  {p.message[:70]:<70}", end="", file=sys.stderr)

    try:
        with Engine(config) as engine:
            result = engine.call(lambda s: calibrate_session(s, mode, args.budget_min, progress=show, cancel=cancel))
    except KeyboardInterrupt:
        cancel.set()
        print("\ncalibration cancelled; no table was written", file=sys.stderr)
        return 130
    except CalibrationCancelled:
        print("\ncalibration cancelled; no table was written", file=sys.stderr)
        return 130
    except EngineError as e:
        print(f"\ndynadraft calibrate: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(
            json.dumps(
                {
                    "table": result.table.to_dict(),
                    "saved_to": str(result.saved_to) if result.saved_to else None,
                    "wall_s": round(result.wall_s, 1),
                    "skipped_contexts": result.skipped_contexts,
                    "unsafe": result.unsafe,
                }
            )
        )
        return 0
    print(file=sys.stderr)
    print(result.markdown)
    if result.saved_to:
        report = result.saved_to.with_suffix(".report.md")
        report.write_text(result.markdown)
        result.saved_to.with_suffix(".report.csv").write_text(result.csv)
        print(f"\ntable {result.table.table_id} saved to {result.saved_to} (report: {report})")
    if result.skipped_contexts:
        print(f"contexts skipped to stay within the budget: {result.skipped_contexts}")
    if result.unsafe:
        print("unsafe rows (excluded from selection):\n  " + "\n  ".join(result.unsafe))
    print(f"wall time {result.wall_s:.0f}s")
    return 0
