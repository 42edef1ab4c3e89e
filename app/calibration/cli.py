"""`dynadraft calibrate`: run the quick or full sweep on this device, print the static-vs-DD report, save the table."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from app.calibration.calibrate import calibrate
from app.calibration.runner import CalibrationCancelled, Progress, Result, check_corpus
from app.engine.config_args import config_from_args
from app.engine.types import EngineError
from app.engine.worker import Engine, print_context_notes


def plan_changes(args: argparse.Namespace) -> dict[str, object]:
    """The --contexts / --gen-tokens / --class-prompts / --corpus overrides of the mode's plan (ValueError for bad
    values)."""
    changes: dict[str, object] = {}
    if getattr(args, "contexts", None):
        contexts = tuple(sorted({int(c) for c in str(args.contexts).split(",") if c.strip()}))
        if not contexts or contexts[0] < 16:
            raise ValueError("--contexts needs prompt lengths of at least 16 tokens, e.g. 512,2048")
        changes["contexts"] = contexts
    if getattr(args, "corpus", None):
        try:
            raw = Path(args.corpus).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise ValueError(f"cannot read --corpus {args.corpus}: {e.strerror or e}") from e
        changes["corpus"] = check_corpus(raw)
    if getattr(args, "corpus_class", None):
        from app.policy.content_class import CONTENT_CLASSES

        if not getattr(args, "corpus", None):
            raise ValueError("--corpus-class says which class your --corpus text fills: give --corpus FILE too")
        if args.corpus_class not in CONTENT_CLASSES:
            raise ValueError(f"--corpus-class must be one of {', '.join(CONTENT_CLASSES)}, got {args.corpus_class!r}")
        changes["corpus_class"] = args.corpus_class
    if getattr(args, "class_prompts", None) is not None:
        from app.calibration.classes import SECTIONS

        most = max(len(s.instructions) for s in SECTIONS.values())
        if not 1 <= args.class_prompts <= most:
            raise ValueError(f"--class-prompts must be 1 to {most} (the shipped sections have up to {most} prompts)")
        changes["class_prompts"] = args.class_prompts
    if getattr(args, "gen_tokens", None) is not None:
        if args.gen_tokens < 1:
            raise ValueError("--gen-tokens must be at least 1")
        changes["gen_tokens"] = args.gen_tokens
    return changes


class Interruptible:
    """Runs the sweep in a helper thread while the main thread waits for it, so Ctrl+C sets the cancel at once (the
    sweep stops at its next check, between decode steps) instead of after the engine's close has waited for the
    whole sweep. `wait()` returns the sweep's own outcome (its result, or its exception raised again) and whether
    Ctrl+C came: a sweep that ended inside that window has saved its table."""

    def __init__(self, work: Callable[[], Result], cancel: threading.Event) -> None:
        self.cancel = cancel
        self.outcome: list[Result | BaseException] = []
        # An Event, not Thread.join: a join that Ctrl+C interrupts can leave the thread reported as ended.
        self.done = threading.Event()
        threading.Thread(target=self._run, args=(work,), name="dynadraft-calibrate", daemon=True).start()

    def _run(self, work: Callable[[], Result]) -> None:
        try:
            self.outcome.append(work())
        except BaseException as e:  # handed to the waiting thread
            self.outcome.append(e)
        finally:
            self.done.set()

    def wait(self) -> tuple[Result, bool]:
        interrupted = False
        while not self.done.is_set():
            try:
                self.done.wait(0.1)
            except KeyboardInterrupt:
                if interrupted:  # a second Ctrl+C: stop waiting
                    raise
                print("\ncancelling the calibration…", file=sys.stderr)
                interrupted = True
                self.cancel.set()
        done = self.outcome[0]
        if isinstance(done, BaseException):
            raise done
        return done, interrupted


def run_calibrate(args: argparse.Namespace) -> int:
    mode = "full" if args.full else "quick"
    try:
        changes = plan_changes(args)
        config = config_from_args(args)
    except ValueError as e:
        print(f"dynadraft calibrate: {e}", file=sys.stderr)
        return 2
    cancel = threading.Event()

    def show(p: Progress) -> None:
        if not args.json:
            print(f"\r[{p.done:>3}/{p.total}] ETA {p.eta_s:5.0f}s  {p.message[:70]:<70}", end="", file=sys.stderr)

    try:
        with Engine(config) as engine:
            print_context_notes(engine, "dynadraft calibrate")
            sweep = Interruptible(
                lambda: engine.call(lambda s: calibrate(s, mode, args.budget_min, show, cancel, **changes)), cancel
            )
            result, interrupted = sweep.wait()
    except KeyboardInterrupt:  # while the model loads: nothing was measured
        print("\ncalibration cancelled; no table was written", file=sys.stderr)
        return 130
    except CalibrationCancelled:
        print("\ncalibration cancelled; no table was written", file=sys.stderr)
        return 130
    except EngineError as e:
        print(f"\ndynadraft calibrate: {e}", file=sys.stderr)
        return 1
    if interrupted:  # the sweep had ended (and saved) before it saw the cancel: say so, as it is on disk
        where = f"the table was saved to {result.saved_to}" if result.saved_to else "no table was written"
        print(f"\ncalibration interrupted as it finished: {where}", file=sys.stderr)
        return 130
    if args.json:
        print(
            json.dumps(
                {
                    "table": result.table.to_dict(),
                    "saved_to": str(result.saved_to) if result.saved_to else None,
                    "wall_s": round(result.wall_s, 1),
                    "skipped_contexts": result.skipped_contexts,
                    "skipped_classes": result.skipped_classes,
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
    if result.skipped_classes:
        print(
            f"class prompts skipped to stay within the budget: {result.skipped_classes} (a class with none measured "
            "falls back to the context rows)"
        )
    if result.unsafe:
        print("unsafe rows (excluded from selection):\n  " + "\n  ".join(result.unsafe))
    print(f"wall time {result.wall_s:.0f}s")
    return 0
