"""Two rules about a source's first draft, side by side on this CPU's held-out prompts (bench_classes.py), one run.

  DYNADRAFT_HOME=H python bench/bench_first_draft.py cap [--prompts a,b] [--repeats 6] [--md OUT.md]
  DYNADRAFT_HOME=H python bench/bench_first_draft.py lag [--prompts a,b] [--repeats 2] [--md OUT.md]

cap: the pool ("pool n16,p0,cost") with and without the depth cap on a source this request has not tested yet
(adaptive.UNTESTED_BUDGET, off: inf), and plain decoding, interleaved in alternating order. H should hold a
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
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

EDITS = "edit-rename,edit-param"


def _run(s: Any, user: str, spec: Any) -> Any:
    from app.engine.types import DoneEvent, GenerationRequest
    from app.runtime.sampling import SamplingParams

    req = GenerationRequest(
        messages=({"role": "user", "content": user},),
        max_tokens=64,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
    )
    return [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary


def pool_side_by_side(s: Any, prompts: list[str], repeats: int, knob: str, arms: dict[str, Any]) -> list[str]:
    """The pool ("pool n16,p0,cost") on each held-out prompt with `adaptive.<knob>` set to each arm's value (an arm
    named "plain" runs plain decoding), interleaved in alternating order, the source memory frozen so every run
    starts alike; a markdown table of each arm's median tok/s, its runs and drafted/accepted counts."""
    from bench_classes import HELD_OUT

    from app.engine import memory
    from app.speculative import adaptive
    from app.speculative.settings import PLAIN, SpecSettings

    memory.remember = lambda *a, **k: None  # type: ignore[assignment]  # frozen: every run starts alike
    pool = SpecSettings("pool", 16, cost_stop=True)
    kept = getattr(adaptive, knob)
    lines = ["| prompt | arm | median tok/s | runs | drafted/accepted |", "|---|---|---|---|---|"]
    for name in prompts:
        user = {n: u for n, _, u in HELD_OUT}[name]
        rows: dict[str, list[tuple[float, int, int]]] = {a: [] for a in arms}
        for r in range(repeats):
            for arm in list(arms) if r % 2 == 0 else list(arms)[::-1]:
                setattr(adaptive, knob, arms[arm])
                t = _run(s, user, PLAIN if arm == "plain" else pool).timings
                rows[arm].append((round(t.predicted_per_second, 2), t.draft_n, t.draft_n_accepted))
        for arm, rs in rows.items():
            med = statistics.median(x[0] for x in rs)
            runs = ", ".join(f"{x[0]:.1f}" for x in rs)
            da = ", ".join(f"{x[1]}/{x[2]}" for x in rs)
            lines.append(f"| {name} | {arm} | {med:.2f} | {runs} | {da} |")
        print("\n".join(lines[-len(arms) :]), flush=True)
    setattr(adaptive, knob, kept)
    return lines


def cap(s: Any, prompts: list[str], repeats: int) -> list[str]:
    from app.speculative import adaptive

    budget = adaptive.UNTESTED_BUDGET
    arms = {"cap": budget, "no cap": math.inf, "plain": budget}
    return pool_side_by_side(s, prompts, repeats, "UNTESTED_BUDGET", arms)


def lag(s: Any, prompts: list[str], repeats: int) -> list[str]:
    from bench_classes import HELD_OUT

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
                t = _run(s, user, spec).timings
                end = next((x for x in reversed(learnt) if x is not None), None)
                shown = "none measured" if end is None else f"{end:.1f}"
                lines.append(f"| {name} | {rule} | {t.predicted_per_second:.2f} | {shown} |")
                print(lines[-1], flush=True)
    sources.STEADY_SYNC = steady
    adaptive.AdaptiveLength.observe = observe  # type: ignore[method-assign]
    return lines


def main(argv: list[str] | None = None) -> int:
    from bench_classes import _session

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("cap", "lag"))
    ap.add_argument("--prompts", default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--md", default=None)
    args = ap.parse_args(argv)
    s = _session(args.threads)
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
