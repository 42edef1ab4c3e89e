"""Two rules about a source's first draft, side by side on this CPU's held-out prompts (lib/held_out.py), one run.

  DYNADRAFT_HOME=H python -m bench.adaptive.bench_first_draft cap [--prompts a,b] [--repeats 6] [--md OUT.md]
  DYNADRAFT_HOME=H python -m bench.adaptive.bench_first_draft lag [--prompts a,b] [--repeats 2] [--md OUT.md]

cap: the pool ("pool n16,p0,cost") with and without the depth cap on a source this request has not tested yet
(pool.UNTESTED_BUDGET, off: inf), and plain decoding, interleaved in alternating order. H should hold a
calibration's source memory (bench_classes.py calibrate); it is frozen while this runs (no request writes to it), so
every run starts from the same remembered state.
lag: the adaptive length with the draft model ("n8,p0 adaptive"), when a draft that first caught up on the steps the
draft model sat out is a sample of its ms per token (the old rule: sources.STEADY_SYNC huge) and when it is not (now);
the ms per token its cost model holds at the end of each request, and tok/s. The source memory is frozen here
too, so each request starts without a remembered estimate (H may be empty).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from bench.lib.held_out import HELD_OUT
from bench.lib.pair import pair_session, pool_side_by_side, run_greedy

EDITS = "edit-rename,edit-param"


def cap(s: Any, prompts: list[str], repeats: int) -> list[str]:
    from app.speculative import pool

    budget = pool.UNTESTED_BUDGET
    arms = {"cap": budget, "no cap": math.inf, "plain": budget}
    return pool_side_by_side(s, prompts, repeats, "UNTESTED_BUDGET", arms)


def lag(s: Any, prompts: list[str], repeats: int) -> list[str]:
    from app.engine import memory
    from app.speculative import adaptive, sources
    from app.speculative.settings import SpecSettings

    memory.remember = lambda *a, **k: None  # type: ignore[assignment]  # no request hands its estimate to the next
    learnt: list[float | None] = []
    observe = adaptive.AdaptiveLength.observe

    def spy(self: adaptive.AdaptiveLength, *a: Any, **k: Any) -> None:
        observe(self, *a, **k)
        learnt.append(self.cost.draft_ms_per_token)

    adaptive.AdaptiveLength.observe = spy  # type: ignore[method-assign]
    steady = sources.STEADY_SYNC
    rules = {"catch-ups counted (before)": 1 << 30, "catch-ups not counted (now)": steady}
    spec = SpecSettings("draft", 8, 0, 0.0, adaptive=True)
    lines = ["| prompt | rule | tok/s | learnt draft ms per token |", "|---|---|---|---|"]
    for name in prompts:
        user = {n: u for n, _, u in HELD_OUT}[name]
        for r in range(repeats):
            for rule in list(rules) if r % 2 == 0 else list(rules)[::-1]:
                sources.STEADY_SYNC = rules[rule]
                learnt.clear()
                t = run_greedy(s, user, spec).timings
                end = next((x for x in reversed(learnt) if x is not None), None)
                shown = "none measured" if end is None else f"{end:.1f}"
                lines.append(f"| {name} | {rule} | {t.predicted_per_second:.2f} | {shown} |")
                print(lines[-1], flush=True)
    sources.STEADY_SYNC = steady
    adaptive.AdaptiveLength.observe = observe  # type: ignore[method-assign]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("cap", "lag"))
    ap.add_argument("--prompts", default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--md", default=None)
    args = ap.parse_args(argv)
    s = pair_session(args.threads)
    if args.what == "cap":
        lines = cap(s, (args.prompts or EDITS).split(","), args.repeats or 6)
    else:
        lines = lag(s, (args.prompts or "chat-tcp,code-lru,edit-rename").split(","), args.repeats or 2)
    s.close()
    if args.md:
        Path(args.md).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
