"""Source memory: warm vs cold pool start on a sequence of requests whose workload changes half-way.

Runs 4 copy-edit prompts then 4 fresh-code prompts (memory_workload.json here; each fresh-code prompt carries a code
stub, so today's telemetry class is "code" for all eight and the memory must follow the change inside one class).
Every prompt runs twice side by side on one Session: with the source memory (warm: the pool starts from what the
earlier warm runs taught it) and without (cold: every request's pool starts from nothing). The order alternates per
prompt and the prompt cache is off, so neither side reuses the other's prefill. Prints tok/s per request, the
warm/cold ratio, the steps each source drafted for, the memory's reward per arm after each request, and after how
many requests of the new workload each arm's remembered reward settles.

With `--cost gpu-like` the pool optimises a device cost profile instead of measured milliseconds (SIMULATED: the
verify-batch ratios measured on an H200 for the 1.5B and a draft token at 0.1 of a target token, as in
tests/speculative/test_pool_real.py), acceptance staying real; speeds are then printed in simulated tokens per
target-token time (plain decoding = 1.0), since this CPU's wall clock is not what the pool optimised.

Run: python -m bench.adaptive.bench_pool_memory [--max-tokens 96] [--threads 1] [--small] [--cost gpu-like] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary, StepEvent
from app.models.packaged import speculative_pair
from app.runtime.sampling import SamplingParams
from app.speculative.exactness import compare_outputs
from app.speculative.pool import profile_cost
from app.speculative.settings import PLAIN, SpecSettings

POOL = SpecSettings("pool", 8)
GPU_LIKE = profile_cost([1.0, 0.96, 1.1, 1.26, 1.39, 1.52, 1.68, 1.84, 3.0], {"draft": 0.1, "lookup": 0.002})
SETTLED = 0.25  # "followed": the remembered reward is within 25 % of the value it ends the new workload at


def run(s: Session, prompt: str, n: int, warm: bool, spec: SpecSettings = POOL) -> tuple[GenerationSummary, float]:
    """The summary, and its speed: wall tok/s, or with a cost profile simulated tokens per target-token time."""
    s.use_source_memory = warm
    req = GenerationRequest(
        messages=({"role": "user", "content": prompt},),
        max_tokens=n,
        sampling=SamplingParams(),
        speculative=spec,
        cache_prompt=False,
        collect_margins=spec is PLAIN,
    )
    events = list(s.generate(req))
    summary = [e for e in events if isinstance(e, DoneEvent)][0].summary
    cost = s.pool_step_cost
    if cost is None:
        return summary, summary.timings.predicted_per_second
    st = [e for e in events if isinstance(e, StepEvent)]
    return summary, sum(e.emitted for e in st) / max(sum(cost(e.source, e.drafted) for e in st), 1e-9)


def remembered(s: Session, cls: str) -> dict[str, float]:
    """The memory's reward per arm for the class, as tok/s of step time (what the next warm request starts from)."""
    s.use_source_memory = True
    store = s.source_memory()
    mem = store.get(cls) if store is not None else {}
    scale = 1.0 if s.pool_step_cost is not None else 1000.0  # profile units are per target token already
    return {k: round(v.reward * scale, 3) for k, v in mem.items() if v.reward is not None}


def steps(sm: GenerationSummary) -> dict[str, int]:
    """Steps each source drafted for ("none": plain decoding steps)."""
    return {k: v["steps"] for k, v in sm.per_source.items()}


def fmt(d: dict[str, Any]) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(d.items()))


def settle_report(rows: list[dict[str, Any]], k: int) -> list[str]:
    switch = rows[k:]
    out = [
        f"ranked first by the memory after the copy-edit requests: {rows[k - 1]['ranked_first']}; after each "
        f"fresh-code request: {', '.join(r['ranked_first'] for r in switch)}"
    ]
    end = switch[-1]["remembered"]
    for arm in sorted(end):
        start = rows[k - 1]["remembered"].get(arm)
        near = [abs(r["remembered"].get(arm, 0.0) - end[arm]) <= SETTLED * end[arm] for r in switch]
        settled = next((j + 1 for j in range(len(near)) if all(near[j:])), None)
        out.append(
            f"  {arm}: reward {start} remembered after copy-edit -> {end[arm]} after fresh code; within "
            f"{SETTLED:.0%} of that from fresh-code request {settled} on"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--small", action="store_true", help="SmolLM2 with its Q2_K draft, 2 + 2 prompts (a quick check)")
    ap.add_argument("--cost", choices=["measured", "gpu-like"], default="measured", help="gpu-like: SIMULATED costs")
    ap.add_argument("--check", action="store_true", help="also run plain decoding: both outputs vs it (near-tie rule)")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    os.environ.setdefault("DYNADRAFT_HOME", tempfile.mkdtemp(prefix="dd-bench-memory-"))  # a memory of its own
    prompts = json.loads((Path(__file__).parent / "memory_workload.json").read_text())
    k = 2 if args.small else 4
    seq = [("copy-edit", p) for p in prompts["copy-edit"][:k]] + [("fresh-code", p) for p in prompts["fresh-code"][:k]]
    target, draft = speculative_pair(small=args.small)
    s = Session(EngineConfig(str(target), str(draft), n_ctx=4096, n_threads=args.threads))
    if args.cost == "gpu-like":
        s.pool_step_cost, s.pool_cost_label = GPU_LIKE, "gpu-like"
    run(s, seq[-1][1], 16, False)  # warm-up: page the weights in and measure verify costs before timing
    unit = "tok/s" if args.cost == "measured" else "SIMULATED tokens per target-token time (gpu-like profile)"
    print(f"{target.name} + {draft.name}, pool n8, greedy, {args.max_tokens} tokens, {args.threads} thread(s); {unit}")
    print(
        f"{'#':>2} {'workload':<10} {'class':<6} {'cold':>6} {'warm':>6} {'w/c':>6}  {'cold drafted by':<26} "
        f"{'warm drafted by':<26} memory after: reward per arm (tok/s)"
    )
    rows: list[dict[str, Any]] = []
    for i, (kind, prompt) in enumerate(seq):
        order = (False, True) if i % 2 == 0 else (True, False)
        res = {w: run(s, prompt, args.max_tokens, w) for w in order}
        (cold, cold_speed), (warm, warm_speed) = res[False], res[True]
        rewards = remembered(s, warm.content_class)
        exact = "-"
        if args.check:
            plain, _ = run(s, prompt, args.max_tokens, False, PLAIN)
            verdicts = [
                compare_outputs(plain.tokens, plain.margins, plain.finish_reason, sm.tokens, sm.finish_reason)
                for sm in (cold, warm)
            ]
            exact = "/".join("same" if v.identical else "near-tie" if v.acceptable else "MISMATCH" for v in verdicts)
        row = {
            "i": i + 1,
            "workload": kind,
            "class": warm.content_class,
            "cold_tps": round(cold_speed, 3),
            "warm_tps": round(warm_speed, 3),
            "ratio": round(warm_speed / max(cold_speed, 1e-9), 3),
            "cold_steps": steps(cold),
            "warm_steps": steps(warm),
            "warm_started": bool((warm.source_memory or {}).get("warm")),
            "warm_start": (warm.source_memory or {}).get("sources", {}),
            "remembered": rewards,
            "ranked_first": max(rewards, key=lambda a: rewards[a]) if rewards else "-",
            "same_tokens": cold.tokens == warm.tokens,
            "vs_plain_cold_warm": exact,
        }
        rows.append(row)
        print(
            f"{i + 1:>2} {kind:<10} {row['class']:<6} {row['cold_tps']:>6.2f} {row['warm_tps']:>6.2f} "
            f"{row['ratio']:>6.3f}  {fmt(row['cold_steps']):<26} {fmt(row['warm_steps']):<26} {fmt(rewards)}"
        )
    for kind in ("copy-edit", "fresh-code", "all"):
        part = [r for r in rows if kind in ("all", r["workload"])]
        cold_t = sum(r["cold_tps"] for r in part) / len(part)
        warm_t = sum(r["warm_tps"] for r in part) / len(part)
        print(f"{kind}: mean speed cold {cold_t:.2f}, warm {warm_t:.2f}, warm/cold {warm_t / cold_t:.3f}")
    print("\n".join(settle_report(rows, k)))
    print(f"same tokens warm vs cold: {sum(r['same_tokens'] for r in rows)}/{len(rows)}")
    if args.check:
        print("vs plain decoding (cold/warm): " + ", ".join(f"{r['i']}:{r['vs_plain_cold_warm']}" for r in rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    s.close()


if __name__ == "__main__":
    main()
