"""The pool's warm-up of plain decoding, with and without it once a decode is measured, side by side in one run.

  python -m bench.adaptive.bench_plain_warmup sim [--md OUT.md]          # SIMULATED: H200 curves, class traces
  DYNADRAFT_HOME=H python -m bench.adaptive.bench_plain_warmup cpu [--prompts a,b] [--repeats 4] [--md OUT.md]

The rule (pool.PLAIN_WARMUP_PULLS): plain decoding has no acceptance to learn, so once a 1-row decode's ms are
measured the pool no longer spends a request's first steps warming it up ("now": 0 pulls; "before": WARMUP_PULLS).
sim: the pool candidate ("pool n16,p0,cost") replayed over every recorded class trace (bench/lib/simulate.py, acceptance
from this CPU) on the H200 Vulkan cost curves at each context, under both rules; the draft model's cost stop alone
and plain decoding beside them. Deterministic. cpu: the pool on the held-out prompts (bench/lib/held_out.py), both rules
and plain decoding interleaved in alternating order, the source memory frozen (every request starts from H's state).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.lib import stats
from bench.lib.pair import pair_session, pool_side_by_side, run_greedy
from bench.lib.simulate import CostCurve, Device, session_table, simulate

RESULTS = Path(__file__).resolve().parents[1] / "results"
TRACES = RESULTS / "2026-12-02-classes-v5-traces.json"
COSTS = RESULTS / "2026-11-29-h200-vulkan-fa-costs.json"


def _rules() -> dict[str, int]:
    from app.speculative import adaptive

    return {"before": adaptive.WARMUP_PULLS, "now": 0}


def sim(target: str = "q32b+fa", draft: str = "q05b+fa") -> list[str]:
    from app.calibration.runner import candidates
    from app.speculative import pool as pool_rules
    from app.speculative.settings import PLAIN, SpecSettings

    costs = json.loads(COSTS.read_text())["models"]
    dev = Device(CostCurve(costs[target]["ms"]), CostCurve(costs[draft]["ms"]))
    traces = json.loads(TRACES.read_text())["traces"]
    grid = candidates(("draft", "lookup"), "quick")
    pool, alone = SpecSettings("pool", 16, cost_stop=True), SpecSettings("draft", 16, cost_stop=True)
    kept = pool_rules.PLAIN_WARMUP_PULLS
    lines = [
        f"SIMULATED: {len(traces)} class traces ({TRACES.name}), {target} / {draft} on {COSTS.name}; mix tok/s.",
        "",
        "| context | pool, before | pool, now | now / before | draft cost stop alone | plain |",
        "|---|---|---|---|---|---|",
    ]
    for ctx in dev.target.depths:
        session = session_table(traces, grid, ctx, dev)

        def mix(s: SpecSettings, ctx: int = ctx, session: dict = session) -> float:
            timed = []
            for tr in traces:
                n = len(tr["output"])
                timed.append((n, n / simulate([tr], s, ctx, dev, session)["tok_s"] * 1000.0))
            return stats.mix(timed)

        by_rule = {}
        for rule, pulls in _rules().items():
            pool_rules.PLAIN_WARMUP_PULLS = pulls
            by_rule[rule] = mix(pool)
        pool_rules.PLAIN_WARMUP_PULLS = kept
        b, n = by_rule["before"], by_rule["now"]
        lines.append(f"| {ctx} | {b:.2f} | {n:.2f} | {n / b:.3f} | {mix(alone):.2f} | {mix(PLAIN):.2f} |")
        print(lines[-1], flush=True)
    return lines


def cpu(s: Any, prompts: list[str], repeats: int) -> list[str]:
    from app.speculative import pool as pool_rules
    from app.speculative.settings import PLAIN

    run_greedy(s, "Say hello.", PLAIN)  # measures a 1-row decode, as any earlier request of the session has
    arms = {**{f"pool, {r}": p for r, p in _rules().items()}, "plain": pool_rules.PLAIN_WARMUP_PULLS}
    return pool_side_by_side(s, prompts, repeats, "PLAIN_WARMUP_PULLS", arms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("sim", "cpu"))
    ap.add_argument("--prompts", default="chat-tcp,code-lru,edit-rename,json-order")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--md", default=None)
    args = ap.parse_args(argv)
    if args.what == "sim":
        lines = sim()
    else:
        s = pair_session(args.threads)
        lines = cpu(s, args.prompts.split(","), args.repeats)
        s.close()
    if args.md:
        Path(args.md).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
