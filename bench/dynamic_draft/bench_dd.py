"""Dynamic Draft benchmark: quick-calibrate the pair on this device, then on held-out prompts at each calibrated
context run DD vs the fixed n2,p0.0 setting vs plain decoding, side by side. Prints ratios; asserts nothing.

Run: python -m bench.dynamic_draft.bench_dd [--small] [--budget-min 10] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import statistics
import time

from app.calibration.runner import FIXED_BASELINE, build_messages, corpus_text, default_plan, run_calibration
from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.models.packaged import speculative_pair
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN, SpecSettings

HELD_OUT_INSTRUCTION = "\n\nWrite a numbered list of the five most important facts in the document above."


def held_out(session: Session, target: int) -> tuple[dict[str, str], ...]:
    """A prompt of about `target` tokens that calibration never saw: the corpus rotated, another instruction."""
    text = corpus_text()
    rotated = text[len(text) // 3 :] + "\n\n" + text[: len(text) // 3]
    msgs, _ = build_messages(session, target, rotated)
    content = msgs[0]["content"]
    cut = content.rfind("\n\nSummarise")
    return ({"role": "user", "content": content[:cut] + HELD_OUT_INSTRUCTION},)


def tps(session: Session, messages, spec: SpecSettings | None, n: int) -> tuple[float, str]:
    req = GenerationRequest(messages=messages, max_tokens=n, sampling=SamplingParams(), speculative=spec)
    s = [e for e in session.generate(req) if isinstance(e, DoneEvent)][0].summary
    dd = s.dynamic_draft or {}
    return s.timings.predicted_per_second, f"{s.settings.label()} ({dd.get('reason')})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", action="store_true", help="SmolLM2 + its Q2_K build instead of the Qwen pair")
    ap.add_argument("--budget-min", type=float, default=10.0)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    target, draft = speculative_pair(args.small)
    s = Session(EngineConfig(str(target), str(draft), n_ctx=8192, n_batch=512, n_threads=args.threads))
    t0 = time.perf_counter()
    result = run_calibration(
        s,
        default_plan(s, "quick", args.budget_min),
        progress=lambda p: print(
            f"\r  calibrating {p.done}/{p.total} ETA {p.eta_s:4.0f}s {p.message[:50]:<50}", end=""
        ),
    )
    print(f"\nquick calibration: {time.perf_counter() - t0:.0f}s wall, table {result.table.table_id}")
    print(result.markdown)
    if result.skipped_contexts:
        print(f"skipped (budget): {result.skipped_contexts}")
    print(f"\nheld-out prompts, {args.max_tokens} tokens, median of {args.repeats}")
    print(f"{'context':>8} {'plain':>7} {'n2,p0':>7} {'DD':>7} {'DD/plain':>9} {'DD/n2':>7}  DD choice")
    measured = [c for c in default_plan(s, "quick").contexts if c not in result.skipped_contexts]
    for ctx in measured:
        msgs = held_out(s, ctx)
        tps(s, msgs, PLAIN, 4)  # prefill once; every run below reuses the cached prompt
        p = statistics.median(tps(s, msgs, PLAIN, args.max_tokens)[0] for _ in range(args.repeats))
        f = statistics.median(tps(s, msgs, FIXED_BASELINE, args.max_tokens)[0] for _ in range(args.repeats))
        runs = [tps(s, msgs, None, args.max_tokens) for _ in range(args.repeats)]
        d = statistics.median(r[0] for r in runs)
        print(f"{ctx:>8} {p:7.2f} {f:7.2f} {d:7.2f} {d / p:9.2f} {d / f:7.2f}  {runs[-1][1]}")
    s.close()


if __name__ == "__main__":
    main()
