"""Class-aware Dynamic Draft on a mixed workload: class-aware DD vs context-only DD vs the per-prompt oracle vs plain.

  python bench/bench_classes.py measure --out M.json [--threads 1] [--max-tokens 96]   # every candidate, per prompt
  python bench/bench_classes.py calibrate --out T.json [--threads 1]                    # quick calibration, classes
  python bench/bench_classes.py report --runs M.json --table T.json [--h200-costs C.json] [--md OUT.md]

How the comparison is made (one set of runs): `measure` runs every candidate of the quick calibration grid once on
each held-out prompt (Qwen2.5-Coder 1.5B target, 0.5B draft, greedy) and records each prompt's acceptance trace.
`report` derives every policy's pick from those same runs: plain is the "off" run; the oracle is the prompt's
fastest safe candidate (the best static setting for that prompt, known only in hindsight); class-aware DD is what
`DynamicDraftPolicy.decide(prompt_tokens, class)` picks from the calibrated table; context-only DD what it picks
with the class left out (the same table's context rows). DD's picks are among the measured candidates, so its
speed is that candidate's measured speed on the prompt. Mix figures are total tokens / total time over all prompts.

The H200 part is SIMULATED: the recorded traces (acceptance from here) replayed against the previous session's H200
cost curves (bench/simulate.py), with DD's picks made on simulated calibration-prompt traces of each class.
The held-out prompts below are written for this bench; none is calibration text.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_EDIT_CODE = '''def load_scores(path):
    scores = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, value = line.split(",")
            scores[name] = int(value)
    return scores


def best_players(scores, count=3):
    ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
    return [name for name, _ in ranked[:count]]


def average(scores):
    if not scores:
        return 0.0
    return sum(scores.values()) / len(scores)


def report(path):
    scores = load_scores(path)
    print("players:", len(scores))
    print("average:", round(average(scores), 2))
    for name in best_players(scores):
        print("top:", name, scores[name])
'''

_EDIT_PROSE = (
    "Our team spent the last quater rebuilding the onboarding flow for new customers. The old flow asked for ten "
    "peices of information before showing anything useful, and most people gave up half way. The new flow asks for "
    "an email adress and a password, then lets people explore a demo project straight away; the remaining details "
    "are requested later, when they are actualy needed. Early numbers are encouraging: the share of visitors who "
    "finish signing up rose from 31 to 47 percent, and support tickets about the sign-up page dropped by a third. "
    "We still have work to do on the mobile version, where the keyboard hides the submit button on smaller "
    "screens, and on the welcome email, which many people never recieve because it lands in their spam folder."
)

_JS = '''function groupBy(items, key) {
  const out = {};
  for (const item of items) {
    const k = item[key];
    if (!(k in out)) {
      out[k] = [];
    }
    out[k].push(item);
  }
  return out;
}

function countBy(items, key) {
  const groups = groupBy(items, key);
  const counts = {};
  for (const k of Object.keys(groups)) {
    counts[k] = groups[k].length;
  }
  return counts;
}

module.exports = { groupBy, countBy };
'''

_ORDER_TEXT = (
    "Hello, this is Jonas Berg from Lakeside Bakery. I would like to order 40 sourdough loaves, 120 croissants and "
    "two trays of cinnamon buns for Friday 12 September, delivered to 18 Harbour Lane before 7 am. Please invoice "
    "the bakery as usual; our order reference is LB-2291. If the croissants are not possible, 80 pains au chocolat "
    "would also work. My phone number is 555-0142 if anything is unclear."
)

HELD_OUT: list[tuple[str, str, str]] = [
    # (name, expected class, user message)
    ("chat-tcp", "chat", "Explain the difference between TCP and UDP to a beginner, with an everyday analogy."),
    ("chat-sleep", "chat", "What are some practical tips for sleeping better when working night shifts?"),
    ("chat-history", "chat", "Tell me briefly how the printing press changed Europe in the fifteenth century."),
    ("code-merge", "code", "Write a Python function that merges two sorted lists into one sorted list, with a "
     "docstring and a short example."),
    ("code-lru", "code", "Implement an LRU cache class in Python with get and put methods, both O(1)."),
    ("code-sql", "code", "Write an SQL query that returns, for each customer, the total of their orders in 2025, "
     "highest first, from tables customers(id, name) and orders(id, customer_id, amount, created_at)."),
    ("edit-rename", "copy_edit", "Rename the function `average` to `mean_score` everywhere in this code and return "
     "the full file, nothing else:\n\n" + _EDIT_CODE),
    ("edit-typos", "copy_edit", _EDIT_PROSE + "\n\nFix the spelling mistakes in the text above and return the "
     "corrected text in full, nothing else."),
    ("edit-js", "copy_edit", _JS + "\nAdd JSDoc comments to every function above and return the whole updated "
     "file."),
    ("json-order", "structured", _ORDER_TEXT + '\n\nReturn this order as a JSON object with the keys "customer", '
     '"items" (a list of {"product", "quantity"}), "date", "address" and "reference". Respond with JSON only.'),
    ("json-fruits", "structured", "Give me a JSON array of five fruits, each an object with the keys name, colour "
     "and season. Output valid JSON only."),
    ("json-meeting", "structured", "Turn this into JSON with keys title, date, attendees (list) and decisions "
     "(list): Weekly sync, 3 March. Present: Ana, Li, Omar. Decided to move the release to Tuesday and to hire "
     "a second designer. Respond with JSON only."),
]  # fmt: skip


def interleaved() -> list[tuple[str, str, str]]:
    """The held-out prompts one class after another (chat, code, copy_edit, structured, chat, ...), so a run cut
    short still holds every class."""
    by_class: dict[str, list[tuple[str, str, str]]] = {}
    for p in HELD_OUT:
        by_class.setdefault(p[1], []).append(p)
    lanes = list(by_class.values())
    return [lane[i] for i in range(max(map(len, lanes))) for lane in lanes if i < len(lane)]


def _session(threads: int, n_ctx: int = 4096):
    from app.engine.session import EngineConfig, Session
    from app.models.packaged import ensure_model

    target, draft = ensure_model("qwen2.5-coder-1.5b"), ensure_model("qwen2.5-coder-0.5b")
    cfg = EngineConfig(
        model=str(target), draft=str(draft), n_ctx=n_ctx, n_batch=512, n_threads=threads, dynamic_draft=False
    )
    return Session(cfg)


def measure(out: str, threads: int, max_tokens: int, traces: bool) -> None:
    """Every quick-grid candidate once per held-out prompt, plus each prompt's acceptance trace (and the class
    calibration prompts' traces, for the simulated DD picks)."""
    from simulate import record_trace

    from app.calibration.classes import SECTIONS, class_corpus, general_corpus
    from app.calibration.runner import build_messages, candidates
    from app.engine.types import DoneEvent, GenerationRequest
    from app.policy.content_class import classify, last_user_text
    from app.runtime.sampling import SamplingParams
    from app.speculative.exactness import compare_outputs
    from app.speculative.settings import PLAIN

    s = _session(threads)
    grid = candidates(s.sources, "quick")
    result: dict = {"max_tokens": max_tokens, "threads": threads, "grid": [g.label() for g in grid], "prompts": []}
    result["traces"] = []
    greedy = SamplingParams(temperature=0.0)
    t_all = time.perf_counter()

    def save() -> None:
        Path(out).write_text(json.dumps(result, indent=1))

    if traces:  # the calibration prompts' traces first: the simulated DD picks need them
        for cls, section in SECTIONS.items():
            msgs, _ = build_messages(s, 512, class_corpus(cls), section.instruction)
            result["traces"].append(record_trace(s, f"calib-{cls}", msgs, max_tokens, measure=False))
            save()
        msgs, _ = build_messages(s, 512, general_corpus())
        result["traces"].append(record_trace(s, "calib-general", msgs, max_tokens, measure=False))
        save()
    for name, expected, user in interleaved():
        msgs = ({"role": "user", "content": user},)
        text = s.render_prompt(GenerationRequest(messages=msgs))
        cls, cue = classify(text, last_user_text(msgs, None))
        n_prompt = len(s.format_prompt(GenerationRequest(messages=msgs)))
        runs = {}
        ref = None
        for setting in grid:
            req = GenerationRequest(
                messages=msgs,
                max_tokens=max_tokens,
                sampling=greedy,
                speculative=setting,
                collect_margins=setting == PLAIN,
            )
            summ = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
            if setting == PLAIN:
                ref = summ
            assert ref is not None
            ok = compare_outputs(ref.tokens, ref.margins, ref.finish_reason, summ.tokens, summ.finish_reason)
            runs[setting.label()] = {
                "tok_s": summ.timings.predicted_per_second,
                "tokens": summ.timings.predicted_n,
                "ms": summ.timings.predicted_ms,
                "drafted": summ.timings.draft_n,
                "accepted": summ.timings.draft_n_accepted,
                "safe": ok.acceptable,
            }
        entry = {"name": name, "expected": expected, "class": cls, "cue": cue, "prompt_tokens": n_prompt}
        result["prompts"].append(entry | {"runs": runs})
        line = ", ".join(f"{k} {v['tok_s']:.1f}" for k, v in runs.items())
        print(f"{name} [{cls}/{cue}] {n_prompt} tok: {line} ({time.perf_counter() - t_all:.0f}s)", flush=True)
        save()
        if traces:
            result["traces"].append(record_trace(s, name, msgs, max_tokens, measure=False))
            save()
    print(f"measured in {time.perf_counter() - t_all:.0f}s", flush=True)
    s.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", required=True)
    m.add_argument("--threads", type=int, default=1)
    m.add_argument("--max-tokens", type=int, default=96)
    m.add_argument("--no-traces", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "measure":
        measure(args.out, args.threads, args.max_tokens, not args.no_traces)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
