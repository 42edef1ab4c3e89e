"""What a draft model's step costs after its KV fell behind, and what the pool learns from it as ms per draft token.

  python -m bench.adaptive.bench_draft_lag [--threads 2] [--md OUT.md]

Real draft source (Qwen2.5-Coder 0.5B, CPU) on a held-out prompt (bench/lib/held_out.py): a 1-token draft after the KV
lags by L tokens (the plain steps another arm ran), L = 1..32, two runs each, beside the catch-up the pool prices
for that lag (catch_up_ms: L - 1 tokens at the measured prefill speed); then steady drafts of 1, 4 and 8 tokens at
lag 1. Then the same samples as the pool would see them, steady 8-token drafts alternating with 1-token probes after
a lag of 16: the ms per draft token its cost model learns when every step is a sample, and when a step that caught
up is not (SourcePool.observe).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.lib.held_out import HELD_OUT
from bench.lib.pair import pair_session

LAGS = (1, 2, 4, 8, 16, 32)


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from app.engine.types import GenerationRequest
    from app.runtime.sampling import SamplingParams
    from app.speculative.adaptive import CostModel
    from app.speculative.sources import catch_up_ms

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--md", default=None)
    args = ap.parse_args(argv)
    s = pair_session(args.threads)
    src = s.sources["draft"]
    user = {n: u for n, _, u in HELD_OUT}["edit-param"]
    history = list(s.format_prompt(GenerationRequest(messages=({"role": "user", "content": user},))))
    greedy, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
    filler = history[20:80]  # text to extend the history with: what the target committed while the draft sat out
    first = src.propose(history, 1, 0, 0.0, greedy, rng)
    lines = [
        f"Prompt of {len(history)} tokens; the first draft (its catch-up) {first.draft_ms:.1f} ms; measured prefill "
        f"{src.prefill_ms_per_token:.2f} ms per token.",
        "",
        "| lag (tokens) | 1-token draft ms | priced catch-up ms | draft ms less catch-up |",
        "|---|---|---|---|",
    ]
    at: dict[int, list[float]] = {}
    for lag in LAGS:
        for _ in range(2):
            history = history + filler[:lag]
            d = src.propose(history, 1, 0, 0.0, greedy, rng)
            c = catch_up_ms(src, lag - 1)
            at.setdefault(lag, []).append(d.draft_ms)
            lines.append(f"| {lag} | {d.draft_ms:.1f} | {c:.1f} | {d.draft_ms - c:.1f} |")
    steady: dict[int, float] = {}
    for k in (1, 4, 8):
        history = history + filler[:1]
        d = src.propose(history, k, 0, 0.0, greedy, rng)
        steady[k] = d.draft_ms / max(len(d.tokens), 1)
    per = ", ".join(f"{k}: {v:.1f}" for k, v in steady.items())
    lines += ["", f"Steady drafts at lag 1, ms per drafted token: {per}"]
    # The pool's view: steady 8-token drafts, and a 1-token probe after 16 plain steps, alternating.
    every, kept = CostModel(), CostModel()
    for i in range(8):
        probe = i % 2 == 1
        drafted, ms = (1, at[16][i % 2]) if probe else (8, steady[8] * 8)
        every.observe(drafted, ms, 1.0)
        kept.observe(drafted, ms, 1.0, draft_sample=not probe)
    lines += [
        "",
        "| the pool's cost model | learnt ms per draft token |",
        "|---|---|",
        f"| every step a sample (before) | {every.draft_ms_per_token:.1f} |",
        f"| a step that caught up is no sample (now) | {kept.draft_ms_per_token:.1f} |",
        f"| steady 8-token drafts, measured | {steady[8]:.1f} |",
    ]
    s.close()
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
