"""The decode loop's own cost: Python time per step outside llama_decode, and tok/s, per draft mode (SmolLM2 pair).

Run: python -m bench.engine.bench_loop [--runs N] [--vs CHECKOUT]
With --vs, the same measurement runs from another checkout (a `git worktree` of the commit before a change) in fresh
processes, interleaved with this tree's, and the after/before ratios are printed: a structural change to the loop
should leave tok/s at >= 0.99x. The per-step Python time is the steadier figure on a noisy machine (a decode's time
varies far more than the loop's own). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

MODES = ("plain", "lookup", "pool", "draft-adaptive", "lookup-cost")
REPO = Path(__file__).resolve().parents[2]


def measure(requests: int) -> dict[str, dict[str, float]]:
    """Median over `requests` of each mode's µs per step outside llama_decode and its tok/s, in this process."""
    from app.engine.config import EngineConfig
    from app.engine.session import Session
    from app.engine.types import DoneEvent, GenerationRequest
    from app.models.packaged import ensure_model, ensure_quantized
    from app.runtime.sampling import SamplingParams
    from app.speculative.settings import PLAIN, SpecSettings

    specs = dict(
        zip(
            MODES,
            (PLAIN, SpecSettings("lookup", 8), SpecSettings("pool", 8), SpecSettings("draft", 8, adaptive=True)),
            strict=False,
        )
    )
    specs["lookup-cost"] = SpecSettings("lookup", 8, cost_stop=True)
    target, draft = ensure_model("smollm2-135m"), ensure_quantized("smollm2-135m", "Q2_K")
    s = Session(EngineConfig(model=str(target), draft=str(draft), n_ctx=2048, n_threads=1, source_memory=False))
    contexts = [s.ctx, s.sources["draft"].ctx]  # type: ignore[attr-defined]
    code = "\n".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(6))
    prompt = f"Repeat this code exactly, then add handler_6 in the same style:\n\n```python\n{code}```"
    out: dict[str, dict[str, float]] = {}
    try:
        for mode, spec in specs.items():
            overhead, tps = [], []
            for _ in range(requests):
                req = GenerationRequest(
                    messages=({"role": "user", "content": prompt},),
                    max_tokens=96,
                    sampling=SamplingParams(temperature=0.0),
                    speculative=spec,
                    cache_prompt=False,
                )
                before = sum(c.decode_s for c in contexts)
                done = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
                decode_s = sum(c.decode_s for c in contexts) - before - done.timings.prompt_ms / 1000.0
                outside = max(0.0, done.timings.predicted_ms / 1000.0 - decode_s)
                overhead.append(outside / max(1, done.steps) * 1e6)
                tps.append(done.timings.predicted_per_second)
            out[mode] = {"us_per_step": statistics.median(overhead), "tok_s": statistics.median(tps)}
    finally:
        s.close()
    return out


def _child(tree: Path, requests: int) -> dict[str, dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "bench.engine.bench_loop", "--json", "--requests", str(requests)]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4, help="fresh processes per tree (default 4)")
    ap.add_argument("--requests", type=int, default=3, help="requests per mode in one process (default 3)")
    ap.add_argument("--vs", metavar="CHECKOUT", help="another checkout to compare with, as 'before'")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one process's figures, for --vs
    args = ap.parse_args()
    if args.json:
        print(json.dumps(measure(args.requests)))
        return
    trees = {"after": REPO} | ({"before": Path(args.vs).resolve()} if args.vs else {})
    runs: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, tree in reversed(trees.items()):  # before, after, before, after, ...
            runs[name].append(_child(tree, args.requests))
    for mode in MODES:
        print(_row(mode, runs))


def _row(mode: str, runs: dict[str, list[dict[str, dict[str, float]]]]) -> str:
    """One mode's medians per tree, and after/before where both ran."""
    keys = ("us_per_step", "tok_s")
    row = {name: {k: statistics.median(r[mode][k] for r in rs) for k in keys} for name, rs in runs.items()}
    line = f"{mode:15s} " + "  ".join(
        f"{n}: {v['tok_s']:6.1f} tok/s {v['us_per_step']:6.0f} µs/step" for n, v in row.items()
    )
    if "before" in row:
        after, before = row["after"], row["before"]
        extra = after["us_per_step"] - before["us_per_step"]
        line += f"  after/before tok/s {after['tok_s'] / before['tok_s']:.3f}, {extra:+.0f} µs/step"
    return line


if __name__ == "__main__":
    main()
