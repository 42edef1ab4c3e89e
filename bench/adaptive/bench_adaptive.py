"""Adaptive draft length and the source pool on a mixed workload (chat, code, copy-edit; workload.json here).

Compares the best static setting (by total tokens per second over the workload, among a small grid) with
adaptive length and with adaptive + pool. Prints tok/s ratios, target verifies and tokens per verify side by side.
On a 2-core CPU tok/s favours plain decoding; fewer verifies per token is what carries to GPUs.

Run: python -m bench.adaptive.bench_adaptive [--small] [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.models.packaged import speculative_pair
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN, SpecSettings

STATIC = [
    PLAIN,
    SpecSettings("draft", 2),
    SpecSettings("draft", 4),
    SpecSettings("draft", 8),
    SpecSettings("lookup", 8),
]
ADAPTIVE = SpecSettings("draft", 8, adaptive=True)
POOL = SpecSettings("pool", 8)


def workload() -> list[tuple[str, str]]:
    data = json.loads((Path(__file__).parent / "workload.json").read_text())
    return [(kind, p) for kind, prompts in data.items() for p in prompts]


def run_all(s: Session, spec: SpecSettings, n: int) -> dict[str, float]:
    tokens = steps = 0
    ms = 0.0
    shares: dict[str, int] = {}
    for _, prompt in workload():
        req = GenerationRequest(
            messages=({"role": "user", "content": prompt},), max_tokens=n, sampling=SamplingParams(), speculative=spec
        )
        sm = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
        tokens += sm.timings.predicted_n
        steps += sm.steps
        ms += sm.timings.predicted_ms
        for src, st in sm.per_source.items():
            shares[src] = shares.get(src, 0) + st["steps"]
    return {"tps": tokens / ms * 1000.0, "verifies": steps, "per_verify": tokens / steps, "shares": shares}  # type: ignore[dict-item]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    target, draft = speculative_pair(args.small)
    s = Session(EngineConfig(str(target), str(draft), n_ctx=2048, n_threads=args.threads, dynamic_draft=False))
    for _, p in workload():  # warm caches and lazily built kernels
        list(s.generate(GenerationRequest(messages=({"role": "user", "content": p},), max_tokens=2)))
    static = {spec.label(): run_all(s, spec, args.max_tokens) for spec in STATIC}
    best_label = max(static, key=lambda k: static[k]["tps"])
    best = static[best_label]
    rows = {
        f"best static ({best_label})": best,
        "adaptive": run_all(s, ADAPTIVE, args.max_tokens),
        "adaptive + pool": run_all(s, POOL, args.max_tokens),
    }
    print(f"{len(workload())} prompts x {args.max_tokens} tokens, greedy, threads {s.ctx.n_threads}")
    for label, r in static.items():
        print(
            f"  static {label:12} {r['tps']:7.2f} tok/s  {r['verifies']:4d} verifies  {r['per_verify']:.2f} tok/verify"
        )
    print(f"{'policy':28} {'tok/s':>7} {'x best':>7} {'verifies':>9} {'tok/verify':>10}  steps by source")
    for label, r in rows.items():
        print(
            f"{label:28} {r['tps']:7.2f} {r['tps'] / best['tps']:7.2f} {r['verifies']:9d} {r['per_verify']:10.2f}  "
            f"{r['shares']}"
        )
    s.close()


if __name__ == "__main__":
    main()
