"""Sampler cost: what each of llama.cpp's samplers adds per verify row, against a row's decode, on the 1.5B target.

Run: python -m bench.engine.bench_samplers [--threads N] [--max-tokens N]
Prints, measured side by side in one run: ms per row of `distribution` on a real logits row (152k vocabulary, a
1,024-token history) for each sampler alone; and real generations (T=0.8, the 0.5B draft, n_max 8) with none of
them and with each, as tokens/s and the ratio to none: a sampler changes the distribution, so the text and the
draft's acceptance change with it; the ratio is that, not only the sampler's cost. Asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.models.packaged import speculative_pair
from app.runtime.dry import DEFAULT_BREAKERS, resolve_breakers
from app.runtime.sampling import SamplingParams, distribution
from app.speculative.settings import SpecSettings

BASE = SamplingParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=1)
KNOBS: dict[str, dict[str, float]] = {
    "none": {},
    "no top-k (as OpenAI clients send)": {"top_k": 0},
    "typical_p 0.9": {"typical_p": 0.9},
    "top_n_sigma 1.5": {"top_n_sigma": 1.5},
    "xtc 0.5/0.1": {"xtc_probability": 0.5, "xtc_threshold": 0.1},
    "dynatemp 0.5": {"dynatemp_range": 0.5},
    "dry 0.8 (last 64)": {"dry_multiplier": 0.8},
    "dry 0.8 (last 1024)": {"dry_multiplier": 0.8, "dry_penalty_last_n": 1024},
    "mirostat 2": {"mirostat": 2},
}
PROMPT = "Write a short essay on why lighthouses were built where they were, with three examples."


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    target, draft = speculative_pair()
    session = Session(EngineConfig(model=str(target), draft=str(draft), n_ctx=4096, n_threads=args.threads))
    try:
        vocab = session.model.vocab
        history = vocab.tokenize(PROMPT * 40, False, False)[:1024]
        t0 = time.perf_counter()
        session.ctx.prefill(history[:256])
        decode_ms = (time.perf_counter() - t0) * 1000.0 / 256
        session.ctx.decode([history[256]])
        row = np.array(session.ctx.logits(0))
        print(f"logits row: {row.shape[0]} tokens; one prefill row ~{decode_ms:.2f} ms\n")
        configs: dict[str, SamplingParams] = {}
        for name, knobs in KNOBS.items():
            params = replace(BASE, **knobs)  # type: ignore[arg-type]
            if params.dry_on:
                t = time.perf_counter()
                breakers = resolve_breakers(
                    DEFAULT_BREAKERS, vocab.all_pieces(), lambda s: vocab.tokenize(s, False, False)
                )
                ms = (time.perf_counter() - t) * 1000
                print(f"resolving DRY's breakers (once per breaker list and model): {ms:.0f} ms")
                params = replace(params, dry_breakers=breakers)
            configs[name] = params
        times: dict[str, list[float]] = {name: [] for name in configs}
        for _ in range(8):  # rounds over every sampler in turn, so a slow spell of the machine hits them all
            for name, params in configs.items():
                for _ in range(5):
                    t = time.perf_counter()
                    distribution(row, params, history)
                    times[name].append((time.perf_counter() - t) * 1000.0)
        print("\n| sampler | ms per row (min) | (median) |\n|---|---|---|")
        for name, ts in times.items():
            print(f"| {name} | {min(ts):.2f} | {np.median(ts):.2f} |")
        print("\n| sampler | tok/s | vs none | accepted/drafted |\n|---|---|---|---|")
        base_rate = None
        spec = SpecSettings(source="draft", n_max=8, p_min=0.0)
        for name, knobs in KNOBS.items():
            request = GenerationRequest(
                messages=({"role": "user", "content": PROMPT},),
                max_tokens=args.max_tokens,
                sampling=replace(BASE, **knobs),  # type: ignore[arg-type]
                speculative=spec,
                cache_prompt=True,
            )
            done = [e for e in session.generate(request) if isinstance(e, DoneEvent)][0].summary
            rate = done.timings.predicted_per_second
            base_rate = base_rate or rate
            t = done.timings
            print(f"| {name} | {rate:.1f} | {rate / base_rate:.3f} | {t.draft_n_accepted}/{t.draft_n} |")
    finally:
        session.close()


if __name__ == "__main__":
    main()
