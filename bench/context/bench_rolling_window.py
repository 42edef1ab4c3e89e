"""A chat longer than the context window: a cut that holds (half the room freed) against one that moves every turn.

Run: python -m bench.context.bench_rolling_window [--model smollm2|qwen1.5b] [--ctx 2048] [--turns 30] [--words 110]
     [--threads N] [--md OUT.md]
Two sessions of the same model run the same chat side by side, turn by turn: "fewest" leaves out the fewest turns that
fit each time (LM Studio's rolling window; what DynaDraft did before), "half" frees half the room when it cuts and then
keeps that cut while the chat fits (app.engine.history.RollingWindow's default, as Ollama's and llama-server's context
shift). Each turn is a user message of --words plain words and a greedy reply of 32 tokens. Prints, per arm and over
the turns after the window first filled: tokens prefilled, the engine's time to first token (template + tokenize +
cache restore + prefill + first sample), and the prompt the model saw (what the cut costs in remembered context).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.config import EngineConfig
from app.engine.history import RollingWindow
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN
from bench.lib.small_models import WORDS, model_path

MAX_TOKENS = 32


@dataclass
class Arm:
    name: str
    session: Session
    messages: list[dict[str, str]] = field(default_factory=lambda: [{"role": "system", "content": "You are terse."}])
    rows: list[tuple[int, int, float, int]] = field(default_factory=list)  # (prompt, prefilled, ttft ms, dropped)

    def turn(self, user: str) -> GenerationSummary:
        self.messages.append({"role": "user", "content": user})
        req = GenerationRequest(
            messages=tuple(self.messages),
            max_tokens=MAX_TOKENS,
            sampling=SamplingParams(temperature=0.0),
            speculative=PLAIN,
            context_overflow="drop_oldest",
        )
        t0 = time.perf_counter()
        done = [ev for ev in self.session.generate(req) if isinstance(ev, DoneEvent)][0].summary
        ttft = (time.perf_counter() - t0) * 1000.0 - done.timings.predicted_ms
        self.messages.append({"role": "assistant", "content": done.text})
        prefilled = done.prompt_tokens - done.timings.cache_n
        self.rows.append((done.prompt_tokens, prefilled, ttft, done.dropped_messages))
        return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2", choices=("smollm2", "qwen1.5b"))
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--words", type=int, default=110, help="words per user message (~1.3 tokens each)")
    ap.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--md", type=Path, help="also write the table as markdown here")
    args = ap.parse_args()
    path = model_path(args.model)
    cfg = EngineConfig(model=str(path), n_ctx=args.ctx, n_threads=args.threads)
    arms = [Arm("fewest", Session(cfg)), Arm("half", Session(cfg))]
    arms[0].session.window = RollingWindow(keep_share=1.0)
    rng = random.Random(7)
    try:
        for i in range(args.turns):
            user = f"Part {i}: " + " ".join(rng.choice(WORDS) for _ in range(args.words))
            for arm in arms:  # side by side: the same message to both, one after the other
                arm.turn(user)
    finally:
        for arm in arms:
            arm.session.close()
    first = min(
        (next((t for t, r in enumerate(a.rows) if r[3]), len(a.rows)) for a in arms), default=0
    )  # the first turn that left something out, in either arm
    lines = [
        f"model {path.name}, n_ctx {args.ctx}, {args.turns} turns of {args.words} words, {args.threads} threads; "
        f"turns {first}..{args.turns - 1} (after the window first filled)",
        "",
        "| arm | turns that re-prefilled > half the window | tokens prefilled | mean TTFT ms | median TTFT ms "
        "| mean prompt tokens (context kept) |",
        "|---|---|---|---|---|---|",
    ]
    totals = {}
    for arm in arms:
        rows = arm.rows[first:]
        big = sum(1 for p, pre, _, _ in rows if pre > args.ctx // 2)
        pre = sum(r[1] for r in rows)
        ttft = [r[2] for r in rows]
        kept = statistics.fmean(r[0] for r in rows) if rows else 0.0
        totals[arm.name] = (pre, statistics.fmean(ttft) if ttft else 0.0, kept)
        lines.append(
            f"| {arm.name} | {big} / {len(rows)} | {pre} | {totals[arm.name][1]:.0f} | "
            f"{statistics.median(ttft) if ttft else 0:.0f} | {kept:.0f} |"
        )
    f, h = totals["fewest"], totals["half"]
    if f[0] and f[1] and f[2]:
        lines += [
            "",
            f"half / fewest: tokens prefilled {h[0] / f[0]:.3f}x, mean TTFT {h[1] / f[1]:.3f}x, "
            f"context kept {h[2] / f[2]:.3f}x",
        ]
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
