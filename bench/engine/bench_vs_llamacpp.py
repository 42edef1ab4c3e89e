"""DynaDraft's decode loop vs llama.cpp's own C++ loop (llama-server) on the same models, prompt tokens and settings.

The C++ side is `llama-server` built by scripts/build-llama-server.sh from the llama.cpp source vendored in the pinned
llama-cpp-python sdist, with the wheel's CPU flags (same commit, same kernels). It runs as DynaDraft's external
runtime, so both sides get the same token ids, n_predict, greedy sampling and flash-attention setting, and both
report llama.cpp's timing names: predicted_per_second counts the tokens after the prompt, timed from the end of
prompt processing, on both sides. Two servers: one plain, one started with the draft at n_max/p_min 0 (this build
ignores per-request draft fields). Runs are interleaved (C++, Python, C++, …) so machine noise hits both sides
alike; prints medians and the DynaDraft ÷ llama.cpp ratio (goal ≥ 0.95). Asserts nothing.

Run: python -m bench.engine.bench_vs_llamacpp [--server PATH] [--small] [--n 64] [--threads 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
from dataclasses import replace
from pathlib import Path

from app.engine.config import EngineConfig
from app.engine.external import ExternalSession
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.models.packaged import speculative_pair
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN, SpecSettings

ROOT = Path(__file__).resolve().parents[2]
PROMPT = 'def parse_csv_line(line):\n    """Split one CSV line into fields, honouring double quotes."""\n'


def run(session: Session | ExternalSession, spec: SpecSettings, n: int) -> tuple[float, float, tuple[int, ...]]:
    """tok/s after the prompt, draft acceptance, and the tokens of one greedy generation."""
    req = GenerationRequest(
        prompt=PROMPT, max_tokens=n, sampling=SamplingParams(), speculative=spec, cache_prompt=False
    )
    sm = [e for e in session.generate(req) if isinstance(e, DoneEvent)][0].summary
    t = sm.timings
    return t.predicted_per_second, (t.draft_n_accepted / t.draft_n if t.draft_n else 0.0), sm.tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", type=Path, help="llama-server (default: the one scripts/build-llama-server.sh built)")
    ap.add_argument("--small", action="store_true", help="SmolLM2 + its Q2_K re-quantisation instead of Qwen 1.5B/0.5B")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--n-max", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--flash-attn", default="auto", choices=("auto", "on", "off"))
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    server = args.server or Path(
        subprocess.run(
            [str(ROOT / "scripts/build-llama-server.sh"), "--path"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    if not server.exists():
        raise SystemExit(f"{server} not found: run scripts/build-llama-server.sh first")
    target, draft = speculative_pair(args.small)
    spec = SpecSettings("draft", args.n_max, 0, 0.0)
    base = EngineConfig(
        str(target),
        n_ctx=1024,
        n_batch=512,
        n_threads=args.threads,
        flash_attn=args.flash_attn,
        dynamic_draft=False,
        default_spec=PLAIN,
    )
    ours = Session(replace(base, draft=str(draft)))
    cpp_plain = ExternalSession(replace(base, server_binary=str(server)))
    # The server drafts with its start flags (this build ignores per-request draft fields): n_max = the cap.
    cpp_spec = ExternalSession(
        replace(base, draft=str(draft), server_binary=str(server), default_spec=spec, draft_n_max_cap=args.n_max)
    )
    try:
        for sess, st in ((ours, PLAIN), (ours, spec), (cpp_plain, PLAIN), (cpp_spec, spec)):
            run(sess, st, 8)  # warm-up
        rows: dict[str, list[float]] = {"cpp plain": [], "dd plain": [], "cpp spec": [], "dd spec": []}
        acc = {"cpp": 0.0, "dd": 0.0}
        same = {"plain": True, "spec": True}
        for _ in range(args.repeats):
            cp, _, cp_toks = run(cpp_plain, PLAIN, args.n)
            dp, _, dp_toks = run(ours, PLAIN, args.n)
            cs, acc["cpp"], cs_toks = run(cpp_spec, spec, args.n)
            ds, acc["dd"], ds_toks = run(ours, spec, args.n)
            rows["cpp plain"].append(cp)
            rows["dd plain"].append(dp)
            rows["cpp spec"].append(cs)
            rows["dd spec"].append(ds)
            same["plain"] &= cp_toks == dp_toks
            same["spec"] &= cs_toks == ds_toks
    finally:
        for sess in (ours, cpp_plain, cpp_spec):
            sess.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(
        f"target {target.name}, draft {draft.name}, {args.n} tokens, greedy, {args.threads} threads, flash attention "
        f"{args.flash_attn}, median of {args.repeats} interleaved runs; llama.cpp = {server}"
    )
    print(
        f"plain decoding:                 llama.cpp {med['cpp plain']:6.2f} tok/s   DynaDraft {med['dd plain']:6.2f} "
        f"tok/s   ratio {med['dd plain'] / med['cpp plain']:.3f}   same tokens: {same['plain']}"
    )
    print(
        f"speculative n_max={args.n_max}, p_min=0:   llama.cpp {med['cpp spec']:6.2f} tok/s   DynaDraft "
        f"{med['dd spec']:6.2f} tok/s   ratio {med['dd spec'] / med['cpp spec']:.3f}   same tokens: {same['spec']}"
        f"   (acceptance: llama.cpp {acc['cpp']:.0%}, DynaDraft {acc['dd']:.0%})"
    )
    for k, v in rows.items():
        print(f"  {k:10s} " + " ".join(f"{x:6.2f}" for x in v))


if __name__ == "__main__":
    main()
