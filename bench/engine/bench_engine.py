"""Engine benchmark: plain vs speculative tok/s on the real 1.5B/0.5B pair, tokens per verify, Python overhead.

Run: python -m bench.engine.bench_engine [--max-tokens N] [--threads N] [--small]
Prints ratios measured side by side in one run; asserts nothing. --small uses SmolLM2 with its Q2_K re-quantisation.
"""

from __future__ import annotations

import argparse
import statistics
import time

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.models.packaged import speculative_pair
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN, SpecSettings

PROMPTS = {
    "code": "Write a Python function that parses a CSV line into fields, handling quoted fields. Code only.",
    "chat": "Explain in a short paragraph why the sky is blue.",
    "copy": "Rename the variable `rows` to `records` in this code and print all of it:\n\n"
    "def parse(text):\n    rows = []\n    for line in text.splitlines():\n        rows.append(line.split(','))\n"
    "    return rows\n\ndef count(text):\n    rows = parse(text)\n    return len(rows)\n",
}
SETTINGS = [
    PLAIN,
    SpecSettings("draft", 2),
    SpecSettings("draft", 4),
    SpecSettings("draft", 8),
    SpecSettings("draft", 8, p_min=0.5),
    SpecSettings("lookup", 8),
]


def run(s: Session, prompt: str, spec: SpecSettings, n: int) -> dict[str, float]:
    d0, c0 = s.ctx.decode_s, s.ctx.decode_calls
    dd0 = s.sources["draft"].ctx.decode_s if "draft" in s.sources else 0.0  # type: ignore[attr-defined]
    req = GenerationRequest(
        messages=({"role": "user", "content": prompt},), max_tokens=n, sampling=SamplingParams(), speculative=spec
    )
    t0 = time.perf_counter()
    summary = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
    wall = time.perf_counter() - t0
    t = summary.timings
    in_decode = (s.ctx.decode_s - d0) + (
        (s.sources["draft"].ctx.decode_s - dd0) if "draft" in s.sources else 0.0  # type: ignore[attr-defined]
    )
    return {
        "tps": t.predicted_per_second,
        "per_verify": t.predicted_n / max(summary.steps, 1),
        "accept": t.draft_n_accepted / t.draft_n if t.draft_n else 0.0,
        # Share of the request's wall time spent outside llama_decode (templating, sampling, verification, events).
        "python_pct": 100.0 * max(0.0, wall - in_decode) / max(wall, 1e-9),
        "decodes": s.ctx.decode_calls - c0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    target, draft = speculative_pair(args.small)
    s = Session(
        EngineConfig(str(target), str(draft), n_ctx=2048, n_batch=256, n_threads=args.threads, dynamic_draft=False)
    )
    print(f"target {target.name}, draft {draft.name}, threads {s.ctx.n_threads}, {args.max_tokens} tokens, greedy")
    print(f"{'prompt':6} {'setting':14} {'tok/s':>7} {'x plain':>8} {'tok/verify':>10} {'accept':>7} {'python%':>8}")
    for name, prompt in PROMPTS.items():
        run(s, prompt, PLAIN, 8)  # warm the prefix cache so every setting sees the same cache state
        base = None
        for spec in SETTINGS:
            rows = [run(s, prompt, spec, args.max_tokens) for _ in range(args.repeats)]
            tps = statistics.median(r["tps"] for r in rows)
            base = base or tps
            r = rows[-1]
            print(
                f"{name:6} {spec.label():14} {tps:7.2f} {tps / base:8.2f} {r['per_verify']:10.2f} "
                f"{r['accept']:7.2f} {statistics.median(x['python_pct'] for x in rows):7.1f}%"
            )
    s.close()


if __name__ == "__main__":
    main()
