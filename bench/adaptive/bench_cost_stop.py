"""The cost stop against fixed and adaptive drafts, H200 SIMULATED (recorded CPU traces x measured H200 cost curves).

  python -m bench.adaptive.bench_cost_stop [--traces bench/results/2026-11-29-cpu-traces.json] \
      [--costs bench/results/2026-11-29-h200-vulkan-fa-costs.json] [--draft q05b+fa]

Every cell is tok/s over plain decoding of the same target at that context, from bench/lib/simulate.py (a cost-stop
setting steps through the engine's own cost_stop_step with the trace's draft confidences); nothing here ran on an
H200.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from app.speculative.settings import PLAIN, SpecSettings
from bench.lib.simulate import CostCurve, Device, simulate

ROOT = Path(__file__).resolve().parents[2]

SETTINGS = (
    SpecSettings("draft", 2),
    SpecSettings("draft", 16, p_min=0.75),  # llama.cpp's draft defaults
    SpecSettings("draft", 8, adaptive=True),
    SpecSettings("draft", 16, cost_stop=True),
    SpecSettings("draft", 16, adaptive=True, cost_stop=True),
    SpecSettings("lookup", 8),
    SpecSettings("lookup", 16, cost_stop=True),
)


def table(traces: list[dict], costs: dict, draft: str) -> list[str]:
    rows = ["| target | context | trace | " + " | ".join(s.label() for s in SETTINGS) + " |"]
    rows.append("|---|---|---|" + "---|" * len(SETTINGS))
    work = [t for t in traces if not t["name"].startswith("calib")]
    for name in (n for n in costs if n.endswith("+fa") and n != draft):
        curve = CostCurve(costs[name]["ms"])
        dev = Device(curve, CostCurve(costs[draft]["ms"]))
        for ctx in curve.depths:
            for label, group in [("all", traces), *((t["name"], [t]) for t in work)]:
                plain = simulate(group, PLAIN, ctx, dev)["tok_s"]
                cells = [f"{simulate(group, s, ctx, dev)['tok_s'] / plain:.2f}x" for s in SETTINGS]
                rows.append(f"| {name} | {ctx} | {label} | " + " | ".join(cells) + " |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(ROOT / "bench/results/2026-11-29-cpu-traces.json"))
    ap.add_argument("--costs", default=str(ROOT / "bench/results/2026-11-29-h200-vulkan-fa-costs.json"))
    ap.add_argument("--draft", default="q05b+fa", help="the draft model's name in the costs file")
    a = ap.parse_args()
    traces = json.loads(Path(a.traces).read_text())["traces"]
    costs = json.loads(Path(a.costs).read_text())["models"]
    print(f"SIMULATED: traces {a.traces}, costs {a.costs} (draft {a.draft}); x plain decoding of the same target")
    print("\n".join(table(traces, costs, a.draft)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
