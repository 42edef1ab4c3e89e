"""The pool weighing a draft model's catch-up (prefilling text it has not seen) vs ignoring it, side by side with plain.

  python -m bench.adaptive.bench_catch_up --out R.json [--threads 2] [--max-tokens 64] [--repeats 2] [--md OUT.md]

Real engine, CPU: Qwen2.5-Coder 1.5B target, 0.5B draft, greedy, the held-out prompts (bench/lib/held_out.py). Three
candidates per prompt: plain ("off"), the pool as it now runs ("pool, catch-up weighed") and the same pool with the
catch-up left out of its choice ("pool, catch-up ignored", Session.weigh_catch_up False: the behaviour before).
Every run follows a run on another prompt (repeat, then candidate, then prompt; the candidates' order reversed on
every other repeat), as a new conversation would: the
draft model's KV holds another text, so its first draft pays the catch-up. Generation speed is the response's own
`predicted_per_second` (prompt processing of the target excluded; the draft's catch-up happens during generation
and is included). The source memory is on, in a fresh DYNADRAFT_HOME, as a user's first session would be.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from statistics import median

from bench.lib.held_out import interleaved
from bench.lib.pair import pair_session

CANDIDATES = ("off", "pool, catch-up weighed", "pool, catch-up ignored")


def run(out: str, threads: int, max_tokens: int, repeats: int) -> dict:
    from app.engine.types import DoneEvent, GenerationRequest
    from app.runtime.sampling import SamplingParams
    from app.speculative.settings import PLAIN, SpecSettings

    pool = SpecSettings("pool", 16, cost_stop=True)  # the quick grid's pool candidate
    s = pair_session(threads)
    greedy = SamplingParams(temperature=0.0)
    prompts = interleaved()
    result: dict = {"max_tokens": max_tokens, "threads": threads, "repeats": repeats, "prompts": {}}
    t0 = time.perf_counter()
    for r in range(repeats):
        for cand in CANDIDATES if r % 2 == 0 else CANDIDATES[::-1]:  # alternate: neither pool always runs first
            for name, cls, user in prompts:
                s.weigh_catch_up = cand != "pool, catch-up ignored"
                req = GenerationRequest(
                    messages=({"role": "user", "content": user},),
                    max_tokens=max_tokens,
                    sampling=greedy,
                    speculative=PLAIN if cand == "off" else pool,
                )
                summ = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
                draft = summ.per_source.get("draft", {})
                entry = result["prompts"].setdefault(name, {"class": cls, "prompt_tokens": summ.prompt_tokens})
                entry.setdefault(cand, []).append(
                    {
                        "tok_s": summ.timings.predicted_per_second,
                        "tokens": summ.timings.predicted_n,
                        "ms": summ.timings.predicted_ms,
                        "draft_drafted": draft.get("drafted", 0),
                        "draft_idle_reason": draft.get("idle_reason"),
                        "drafted": summ.timings.draft_n,
                        "accepted": summ.timings.draft_n_accepted,
                    }
                )
            print(f"repeat {r + 1}, {cand} ({time.perf_counter() - t0:.0f}s)", flush=True)
            Path(out).write_text(json.dumps(result, indent=1))
    s.close()
    return result


def report(result: dict) -> str:
    """Per prompt and for the mix (total tokens / total time of each candidate's median runs)."""
    lines = [
        f"CPU, measured: {len(result['prompts'])} held-out prompts, {result['max_tokens']} tokens greedy, "
        f"--threads {result['threads']}, {result['repeats']} repeats; medians. 'draft ran' = runs (of the repeats) "
        "in which the draft model drafted at all.",
        "",
        "| prompt | class | prompt tokens | off | weighed | ignored | weighed / ignored | weighed / off | draft ran "
        "(weighed / ignored) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    tot: dict[str, list[float]] = {c: [0.0, 0.0] for c in CANDIDATES}
    by_class: dict[str, dict[str, list[float]]] = {}
    for name, e in result["prompts"].items():
        med = {c: median(x["tok_s"] for x in e[c]) for c in CANDIDATES}
        ran = {c: sum(x["draft_drafted"] > 0 for x in e[c]) for c in CANDIDATES[1:]}
        for c in CANDIDATES:
            toks = median(x["tokens"] for x in e[c])
            for acc in (tot[c], by_class.setdefault(e["class"], {k: [0.0, 0.0] for k in CANDIDATES})[c]):
                acc[0] += toks
                acc[1] += toks / med[c]
        w, i, o = med["pool, catch-up weighed"], med["pool, catch-up ignored"], med["off"]
        lines.append(
            f"| {name} | {e['class']} | {e['prompt_tokens']} | {o:.2f} | {w:.2f} | {i:.2f} | {w / i:.3f} | "
            f"{w / o:.3f} | {ran['pool, catch-up weighed']} / {ran['pool, catch-up ignored']} |"
        )
    lines += ["", "| | off tok/s | weighed tok/s | ignored tok/s | weighed / ignored | weighed / off | ignored / off |"]
    lines.append("|---|---|---|---|---|---|---|")
    for label, t in [("mix", tot), *sorted(by_class.items())]:
        rate = {c: t[c][0] / t[c][1] for c in CANDIDATES}
        w, i, o = rate["pool, catch-up weighed"], rate["pool, catch-up ignored"], rate["off"]
        lines.append(f"| {label} | {o:.2f} | {w:.2f} | {i:.2f} | {w / i:.3f} | {w / o:.3f} | {i / o:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--md", default=None)
    ap.add_argument("--report-only", action="store_true", help="re-render --out without running")
    args = ap.parse_args(argv)
    if args.report_only:
        result = json.loads(Path(args.out).read_text())
    else:
        os.environ.setdefault("DYNADRAFT_HOME", tempfile.mkdtemp(prefix="dd-catch-up-"))
        result = run(args.out, args.threads, args.max_tokens, args.repeats)
    text = report(result)
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
