"""Trace-driven speculative-decoding simulator: real acceptance (recorded on CPU) x a device's verify-cost curve.

  python -m bench.lib.simulate --traces TRACES.json --costs COSTS.json [--target 1.5b --draft 0.5b] [--json OUT]
  python -m bench.lib.simulate record --out TRACES.json [--max-tokens 128]        # real Qwen pair, CPU, greedy
  python -m bench.lib.simulate --traces T.json --costs CPU_COSTS.json --validate   # predicted vs measured (same device)
  python -m bench.lib.simulate --engine ENGINE.json --costs COSTS.json --target T --draft D  # cost side, on the device

Why it is exact for greedy decoding: the committed output of greedy speculation is the target's greedy output,
whatever the draft setting. `record` stores, per prompt, that output and, at every position k, what each draft
source would propose from the correct history: the draft model's top-1 token and its probability (teacher-forced,
one batched pass), the draft's own continuation's probabilities after a wrong token (until they fall below 0.25),
and the prompt-lookup proposal. Replaying a setting (source, n_max, n_min, p_min) over that table gives, step by
step, exactly the drafted and accepted counts the engine would see (p_min in (0, 0.25) is approximate after a
rejected token). Each step then costs

  draft:  lookup ~0; draft model: a sync decode of 1 token (2 when the whole draft was accepted last step)
          + one 1-token decode per further drafted token         -> the draft model's cost curve at that context
  verify: one decode of drafted+1 tokens with logits on every row -> the target's cost curve at that context
  + a fixed per-step overhead and a per-row overhead (Python: logits copy, greedy check), --overhead-ms/--row-ms

Costs come from bench/gpu/measure.py costs (median ms per batch size 1..16 at several KV depths; interpolated
linearly in depth). Acceptance is assumed independent of the context length (the traces are replayed with the cost
curve of each context): the figures are SIMULATED and labelled so. Adaptive and pool settings run the engine's own
controllers (app/speculative/adaptive.py) step by step, fed with the simulated milliseconds; a cost-stop setting
steps through the engine's own cost_stop_step with those costs and the trace's draft_conf (lookup: certain tokens).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from app.speculative.settings import SpecSettings

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------------------------------------
# settings grid (the quick calibration's non-adaptive candidates, plus p_min variants)


def grid(has_draft: bool = True) -> list[SpecSettings]:
    out = [SpecSettings("none")]
    if has_draft:
        out += [SpecSettings("draft", n, 0, p) for n in (1, 2, 3, 4, 6, 8, 12, 16) for p in (0.0, 0.25, 0.5, 0.75)]
        out += [SpecSettings("draft", 8, 0, 0.0, True), SpecSettings("pool", 16, cost_stop=True)]
        out += [SpecSettings("draft", 16, cost_stop=True)]
    out += [SpecSettings("lookup", n) for n in (2, 4, 8, 12, 16)] + [SpecSettings("lookup", 8, 0, 0.0, True)]
    out += [SpecSettings("lookup", 16, cost_stop=True)]
    return out


FIXED = SpecSettings("draft", 2, 0, 0.0)  # the seed's fixed static setting, n2,p0.0


# ---------------------------------------------------------------------------------------------------------------------
# costs


class CostCurve:
    """ms for a decode of b tokens at KV depth c, from measure.py's {"ms": {depth: {b: ms}}}; linear in depth."""

    def __init__(self, rows: dict[str, dict[str, float]]) -> None:
        self.depths = sorted(int(c) for c in rows)
        self.ms = {int(c): {int(b): v for b, v in r.items() if b.isdigit()} for c, r in rows.items()}
        self.batches = sorted(set.intersection(*(set(r) for r in self.ms.values())))
        self.bmax = self.batches[-1]

    def __call__(self, b: int, depth: float) -> float:
        b = max(1, b)
        if b > self.bmax:  # beyond the measured batches: extrapolate linearly from the last two
            below = max(x for x in self.batches if x < self.bmax)
            last, prev = self(self.bmax, depth), self(below, depth)
            return last + (b - self.bmax) * max(0.0, last - prev) / (self.bmax - below)
        # A batch size that was not measured costs what the next measured one does: never less than the truth
        # (cost grows with b), and exact at a cliff such as the H200's jump between 8 and 10 rows.
        b = next(x for x in self.batches if x >= b)
        ds = self.depths
        if depth <= ds[0]:
            return self.ms[ds[0]][b]
        if depth >= ds[-1]:
            if len(ds) == 1:
                return self.ms[ds[-1]][b]
            d0, d1 = ds[-2], ds[-1]
        else:
            d1 = next(d for d in ds if d >= depth)
            d0 = ds[ds.index(d1) - 1]
        y0, y1 = self.ms[d0][b], self.ms[d1][b]
        return y0 + (y1 - y0) * (depth - d0) / (d1 - d0)


@dataclass(frozen=True)
class Device:
    """Everything a step costs on one device: the target's and draft's cost curves, a fixed per-step overhead and
    an overhead per verified row (Python: logits copy, greedy check), in ms."""

    target: CostCurve
    draft: CostCurve | None = None
    overhead: float = 0.0
    row: float = 0.0
    # ms per token of a draft-model prefill at KV depth c; set, it prices the draft's catch-up (see catch_up_rate)
    # and every simulated request is a first turn: the draft model has not seen the prompt.
    draft_prefill: Callable[[float], float] | None = None


def catch_up_rate(costs: dict) -> Callable[[float], float]:
    """ms per token of the draft model prefilling a prompt of c tokens, from a cost file model's "prefill_ms" (a
    c-token prefill): linear in c through its two deepest points. The 2026-11-29 H200 files' shallow points are not
    usable for this: 2048 costs more than 8192 (pipeline builds in the timing) and 512 was re-measured warm."""
    pts = sorted((int(c), r["prefill_ms"] / int(c)) for c, r in costs["ms"].items() if "prefill_ms" in r)
    (c0, r0), (c1, r1) = pts[-2], pts[-1]
    return lambda c: max(1e-6, r0 + (r1 - r0) * (c - c0) / (c1 - c0))


# ---------------------------------------------------------------------------------------------------------------------
# replay


def draft_step(trace: dict, k: int, s: SpecSettings, depth: int, floors: list[float] | None = None) -> tuple[int, int]:
    """(drafted, accepted) of one step at output position k with at most `depth` drafted tokens; `floors`: the cost
    stop's (app/speculative/adaptive.cost_stop_step), met by the product of the draft's recorded confidences."""
    out_tokens = trace["output"]
    n = len(out_tokens)
    match = trace["draft_match"]  # draft top-1 == target at position k (teacher-forced)
    conf = trace["draft_conf"]  # draft top-1 probability at position k
    off = trace["draft_off_conf"]  # k -> probabilities of the draft's own continuation after its wrong token
    look = trace["lookup"]  # k -> [proposal length (up to 16), matching prefix length]
    drafted = accepted = 0
    if depth > 0 and s.source == "lookup":
        plen, m = look[k]
        drafted = min(plen, depth)
        if drafted < max(s.n_min, 1):
            drafted = 0
        accepted = min(m, drafted)
    elif depth > 0 and s.source == "draft":
        j = k
        chance = 1.0

        def stops(p: float) -> bool:
            nonlocal chance
            chance *= p
            return p < s.p_min or (floors is not None and chance < floors[drafted])

        while drafted < depth and j < n:  # on the target's trajectory
            if stops(conf[j]):
                break
            drafted += 1
            if not match[j]:
                break
            j += 1
        accepted = drafted if (drafted == 0 or match[k + drafted - 1]) else drafted - 1
        if drafted and not match[k + drafted - 1] and drafted < depth:  # off the trajectory: draft goes on
            for p in off.get(str(k + drafted - 1), []):
                if drafted >= depth or stops(p):
                    break
                drafted += 1
            else:
                if s.p_min == 0.0 and floors is None:
                    drafted = depth
        if drafted < max(s.n_min, 1):
            drafted = accepted = 0
    return drafted, accepted


def replay(trace: dict, s: SpecSettings, behind: int = 0) -> list[tuple[str, int, int, int]]:
    """Steps (source, drafted, accepted, draft_sync_tokens) that the engine would take with a fixed setting s;
    `behind`: prompt tokens the draft model has not seen (a first turn), decoded before its first draft."""
    n = len(trace["output"])
    k = 1  # the first output token comes from the prompt's logits, before any step
    steps = []
    sync = 1 + behind
    while k < n:
        depth = min(s.n_max, n - k - 1) if s.source != "none" else 0
        drafted, accepted = draft_step(trace, k, s, depth)
        steps.append((s.source if depth > 0 else "none", drafted, accepted, sync))
        sync = 2 if (s.source == "draft" and drafted > 0 and accepted == drafted) else 1
        k += accepted + 1
    return steps


def replay_controlled(
    trace: dict, s: SpecSettings, context: float, dev: Device, verify_ms: dict[int, float], pool=None, behind: int = 0
) -> list[tuple[str, int, int, int]]:
    """Steps under the engine's own controllers (AdaptiveLength, or SourcePool for "pool"), fed with simulated
    milliseconds, so their choices see this device's costs as they would in the engine. `verify_ms` is the
    session-wide verify cost table the engine shares between requests (acceptance is learnt per request). `pool`:
    a SourcePool the caller built (warm-started from a source memory, say) to run instead of a cold one; the
    caller reads its end state. `behind`: tokens the draft model has not seen (a first turn); from then on the
    tokens other sources commit add to it until the draft runs, and the pool weighs that catch-up as the engine's
    does. The tokens still wanted (the rest of the trace) reach the pool on every step, as the engine's do."""
    from app.speculative.adaptive import AdaptiveLength, CostModel, cost_stop_step
    from app.speculative.pool import SourcePool

    n = len(trace["output"])
    if pool is None and s.source == "pool":
        pool = SourcePool(["draft", "lookup"], s.n_min, s.n_max, verify_ms=verify_ms)
    length = AdaptiveLength(s.n_min, s.n_max, CostModel(verify_ms=verify_ms)) if pool is None else None
    # A cost stop without a controller: plain n_max as the ceiling, costs learnt in the run's own model (the engine's
    # _Run.stop_costs); with one, the controller says whether to draft and its costs set the floors.
    fixed = s.cost_stop and not s.adaptive and pool is None
    k, sync, depth_kv, steps = 1, 1, context, []
    tracking = behind > 0 and dev.draft_prefill is not None
    while k < n:
        plen, lmatch = trace["lookup"][k]
        if pool is not None:
            available = {"draft"} | ({"lookup"} if plen else set())
            catch_up = {"draft": dev.draft_prefill(depth_kv) * behind} if tracking and behind else None  # type: ignore[misc]
            name, want = pool.choose(available, {"lookup": plen} if plen else None, catch_up, n - k)
        else:
            name, want = s.source, (s.n_max if fixed else length.next_length())  # type: ignore[union-attr]
        floors = None
        if s.cost_stop and name != "none" and not (pool is not None and name == "lookup"):  # as Session._draft
            costs = pool.arms[name].length.cost if pool is not None else length.cost  # type: ignore[union-attr]
            depth, floors = cost_stop_step(costs, want, min(s.n_max, n - k - 1))
        else:
            depth = min(want, n - k - 1) if name != "none" else 0
        drafted, accepted = draft_step(trace, k, SpecSettings(name, depth, s.n_min, s.p_min), depth, floors)
        runs_draft = name == "draft" and depth > 0
        step = (name if depth > 0 else "none", drafted, accepted, sync + (behind if runs_draft else 0))
        verify = dev.target(drafted + 1, depth_kv) + dev.overhead + dev.row * (drafted + 1)
        total = step_ms(step, depth_kv, dev)
        if pool is not None:
            peeked = (plen, lmatch) if name == "lookup" else None  # as Session._observe scores its own peek
            pool.observe(name, drafted, accepted, accepted + 1, total - verify, verify, peeked=peeked)
            if plen and name != "lookup":  # the engine scores the peeked proposal against the committed tokens
                pool.observe_shadow("lookup", plen, lmatch, accepted + 1)
        elif step[3] > 2:  # a catch-up's ms are one-off work, not a cost (the engine: a request's first verify)
            if not fixed:
                length.observe(drafted, accepted, total - verify, verify, cost_sample=False)  # type: ignore[union-attr]
        elif fixed:
            length.cost.observe(drafted, total - verify, verify)  # type: ignore[union-attr]
        else:
            length.observe(drafted, accepted, total - verify, verify)  # type: ignore[union-attr]
        steps.append(step)
        sync = 2 if (name == "draft" and drafted > 0 and accepted == drafted) else 1
        if runs_draft:
            behind = 0
        elif tracking:
            behind += accepted + 1  # committed by another source: the draft model has not seen them
        k += accepted + 1
        depth_kv += accepted + 1
    return steps


def step_ms(step, depth: float, dev: Device) -> float:
    source, drafted, accepted, sync = step
    t = dev.target(drafted + 1, depth) + dev.overhead + dev.row * (drafted + 1)
    if source == "draft" and dev.draft is not None:
        # sync: the tokens the draft decodes before drafting (1-2; a first turn's catch-up: the prompt and more)
        head = (
            dev.draft(sync, depth)
            if sync <= dev.draft.bmax or dev.draft_prefill is None
            else dev.draft_prefill(depth) * sync
        )
        t += head + max(0, drafted - 1) * dev.draft(1, depth)
    return t


def steps_ms(steps, context: float, dev: Device) -> float:
    """Predicted time of a list of steps starting at KV depth `context` (each step deepens the cache)."""
    total, depth = 0.0, context
    for st in steps:
        total += step_ms(st, depth, dev)
        depth += st[2] + 1
    return total


def engine_check(runs: list[dict], dev: Device) -> list:
    """Time side of the model, on the device itself: each engine run's own steps (measure.py engine), priced with
    the cost curves, against the run's measured tok/s. Acceptance is taken from the run, so only costs are tested."""
    rows = []
    for run in runs:
        steps, sync = [], 1
        for source, drafted, accepted, *_ in run["steps"]:
            steps.append((source, drafted, accepted, sync))
            sync = 2 if (source == "draft" and drafted > 0 and accepted == drafted) else 1
        ms = steps_ms(steps, run["context"], dev)
        # the engine's first token comes from the prompt's logits, outside the timed steps
        pred = (run["predicted_n"] - 1) / ms * 1000.0 if ms else 0.0
        meas = (run["predicted_n"] - 1) / sum(st[3] + st[4] for st in run["steps"]) * 1000.0
        rows.append(
            {
                "context": run["context"],
                "setting": run["setting"],
                "engine_tok_s": run["tok_s"],
                "steps_tok_s": round(meas, 2),
                "predicted_tok_s": round(pred, 2),
                "ratio": round(pred / meas, 3) if meas else None,
            }
        )
    return rows


def controlled(s: SpecSettings) -> bool:
    """Whether a setting learns verify costs into the session's table (an adaptive length, the pool, a cost stop)."""
    return s.adaptive or s.source == "pool" or s.cost_stop


def session_table(
    traces: list[dict], settings: Collection[SpecSettings], context: float, dev: Device
) -> dict[int, float]:
    """An engine session's verify cost table (Session._verify_ms) after it has served every trace once with every
    controlled setting: the state a calibrated session is in, every batch size those settings reach measured."""
    table: dict[int, float] = {}
    for tr in traces:
        for s in settings:
            if controlled(s):
                replay_controlled(tr, s, context, dev, table)
    return table


def simulate(
    traces: list[dict],
    s: SpecSettings,
    context: float,
    dev: Device,
    session: dict[int, float] | None = None,
    first_turn: bool = False,
) -> dict:
    """Predicted generation tok/s over all traces (total tokens / total time) at KV depth `context`. `session`: the
    engine session's verify cost table (Session._verify_ms, shared by every request and setting), copied; without
    it, the table is warmed by one uncounted pass over these traces alone. `first_turn` (with dev.draft_prefill):
    the draft model has not seen the prompt, so its first draft of each trace decodes it first."""
    tokens = ms = 0.0
    drafted = accepted = nsteps = 0
    learns = controlled(s)
    verify_ms: dict[int, float] = dict(session or {})
    if learns and session is None:  # the session has served requests before: warm its verify table, uncounted
        for tr in traces:
            replay_controlled(tr, s, context, dev, verify_ms)
    behind = int(context) if first_turn and dev.draft_prefill is not None else 0
    for tr in traces:
        steps = replay_controlled(tr, s, context, dev, verify_ms, behind=behind) if learns else replay(tr, s, behind)
        # the first token (from the prompt's logits) is emitted at t=0 like the engine's timer; steps make the rest
        tokens += 1 + sum(a + 1 for _, _, a, _ in steps)
        ms += steps_ms(steps, context, dev)
        drafted += sum(d for _, d, _, _ in steps)
        accepted += sum(a for _, _, a, _ in steps)
        nsteps += len(steps)
    return {
        "tok_s": tokens / ms * 1000.0 if ms else 0.0,
        "steps": nsteps,
        "drafted": drafted,
        "accepted": accepted,
        "tokens_per_step": (tokens - len(traces)) / max(nsteps, 1),
    }


def frontier(traces, cal_traces, contexts, dev: Device, settings):
    """Per context: every setting's predicted tok/s on `traces`; DD picks the best on `cal_traces` (calibration)."""
    table = []
    for c in contexts:
        res = {s.label(): simulate(traces, s, c, dev)["tok_s"] for s in settings}
        cal = {s.label(): simulate(cal_traces, s, c, dev)["tok_s"] for s in settings}
        table.append({"context": c, "workload": res, "calibration": cal, "dd": max(cal, key=cal.get)})

    # best static: one setting for every context, chosen on the calibration traces (sum of time over contexts)
    def total_time(lbl: str) -> float:
        return sum(1.0 / row_["calibration"][lbl] for row_ in table)

    best_static = min((s.label() for s in settings), key=total_time)
    return table, best_static


# ---------------------------------------------------------------------------------------------------------------------
# recording (CPU, real pair)

PROMPTS = {
    "code": "Write a Python function parse_csv(text) that parses CSV text with quoted fields into a list of dicts "
    "keyed by the header row. Include a docstring and handle escaped quotes.",
    "chat": "Explain in a few paragraphs why the sky is blue and why sunsets are red.",
    "copy-edit": None,  # filled from the code corpus: "rename a variable" in ~1,500 characters of code
}


def _copy_edit_prompt() -> str:
    code = (ROOT / "app/speculative/sources.py").read_text()[4000:5500]
    return "Rename the variable `out` to `proposal` in this code and return the whole code, nothing else:\n\n" + code


def record(
    out: str, max_tokens: int, prompts: list[str], calib_contexts: list[int], threads: int = 0, flash_attn: str = "off"
) -> None:
    from app.calibration.runner import build_messages, corpus_text
    from app.engine.config import EngineConfig
    from app.engine.session import Session
    from app.models.packaged import ensure_model

    target, draft = ensure_model("qwen2.5-coder-1.5b"), ensure_model("qwen2.5-coder-0.5b")
    s = Session(
        EngineConfig(
            model=str(target),
            draft=str(draft),
            n_ctx=4096,
            n_batch=512,
            n_threads=threads,
            flash_attn=flash_attn,
            dynamic_draft=False,
        )
    )
    jobs = []
    for name in prompts:
        text = PROMPTS.get(name) or _copy_edit_prompt()
        jobs.append((name, ({"role": "user", "content": text},)))
    corpus = corpus_text()
    for c in calib_contexts:
        msgs, _ = build_messages(s, c, corpus)
        jobs.append((f"calib-{c}", msgs))
    result = {"model": target.name, "draft": draft.name, "max_tokens": max_tokens, "traces": []}
    for name, msgs in jobs:
        trace = record_trace(s, name, msgs, max_tokens)
        result["traces"].append(trace)
        Path(out).write_text(json.dumps(result))
    s.close()


def record_trace(s, name: str, msgs, max_tokens: int, measure: bool = True) -> dict:
    """One prompt's trace on a loaded Session with a draft model: the target's greedy output and, at each position,
    what each source would propose (see the module docstring); with `measure`, also real engine runs of a few
    settings (for --validate)."""
    import numpy as np

    from app.engine.types import DoneEvent, GenerationRequest, StepEvent
    from app.runtime.llama import Context, common_prefix
    from app.runtime.sampling import SamplingParams
    from app.speculative.settings import PLAIN
    from app.speculative.sources import PromptLookupSource

    dctx: Context = s.sources["draft"].ctx  # type: ignore[attr-defined]
    greedy = SamplingParams(temperature=0.0)
    t0 = time.perf_counter()
    prompt = s.format_prompt(GenerationRequest(messages=msgs))
    # 1. the target's own greedy output: plain decoding, one token a step (speculative runs may leave it at a
    #    near-tie, because llama.cpp's logits shift slightly with the verify batch size)
    req = GenerationRequest(messages=msgs, max_tokens=max_tokens, sampling=greedy, speculative=PLAIN)
    done = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
    output = list(done.tokens)
    # 2. the draft model, teacher-forced on prompt + output: its top-1 and probability at every position
    dctx.clear()
    dctx.prefill(prompt)
    rows = [dctx.logits(-1)]
    if len(output) > 1:
        for i in range(0, len(output) - 1, 256):
            chunk = output[i : min(i + 256, len(output) - 1)]
            dctx.decode(chunk, logits_from=0)
            rows += [dctx.logits(j) for j in range(len(chunk))]
    match, conf, top = [], [], []
    for k, lg in enumerate(rows):
        z = lg.astype(np.float64)
        t = int(np.argmax(z))
        p = 1.0 / float(np.exp(z - z[t]).sum())
        top.append(t)
        match.append(t == output[k])
        conf.append(round(p, 4))
    # 3. after a wrong draft token, the draft's own continuation (its probabilities decide where p_min stops it)
    off: dict[str, list[float]] = {}
    for k in range(1, len(output)):
        if match[k]:
            continue
        hist = prompt + output[:k]
        keep = min(common_prefix(dctx.tokens, hist), len(hist))
        if not dctx.truncate(keep):
            dctx.clear()
        if len(dctx.tokens) < len(hist):
            dctx.prefill(hist[len(dctx.tokens) :])
        dctx.decode([top[k]])
        probs = []
        for _ in range(15):
            z = dctx.logits(-1).astype(np.float64)
            t = int(np.argmax(z))
            p = 1.0 / float(np.exp(z - z[t]).sum())
            probs.append(round(p, 4))
            if p < 0.25:
                break
            dctx.decode([t])
        off[str(k)] = probs
    # 4. prompt lookup from the correct history at every position
    look = []
    src = PromptLookupSource()
    for k in range(len(output)):
        d = src.propose(prompt + output[:k], 16, 0, 0.0, greedy, np.random.default_rng(0))
        m = 0
        while m < len(d.tokens) and k + m < len(output) and d.tokens[m] == output[k + m]:
            m += 1
        look.append([len(d.tokens), m])
    dctx.clear()
    # 5. measured engine runs on this machine (for --validate): tok/s and every step
    measured = []
    for st in (
        ()
        if not measure
        else (PLAIN, SpecSettings("draft", 2), SpecSettings("draft", 4, 0, 0.5), SpecSettings("lookup", 8))
    ):
        req = GenerationRequest(messages=msgs, max_tokens=max_tokens, sampling=greedy, speculative=st)
        steps, summ = [], None
        for ev in s.generate(req):
            if isinstance(ev, StepEvent):
                steps.append([ev.source, ev.drafted, ev.accepted, round(ev.draft_ms, 2), round(ev.verify_ms, 2)])
            elif isinstance(ev, DoneEvent):
                summ = ev.summary
        toks = list(summ.tokens)
        diverged = next((i for i, (x, y) in enumerate(zip(toks, output, strict=False)) if x != y), None)
        if diverged is None and len(toks) != len(output):
            diverged = min(len(toks), len(output))
        measured.append(
            {
                "setting": st.to_dict(),
                "label": st.label(),
                "diverged_at": diverged,  # None: the same tokens as the recorded plain output
                "tok_s": summ.timings.predicted_per_second,
                "predicted_ms": summ.timings.predicted_ms,
                "steps": steps,
            }
        )
    trace = {
        "name": name,
        "prompt_tokens": len(prompt),
        "output": output,
        "draft_match": match,
        "draft_conf": conf,
        "draft_off_conf": off,
        "lookup": look,
        "measured": measured,
    }
    print(
        f"{name}: {len(prompt)} prompt tokens, {len(output)} generated, draft top-1 match "
        f"{sum(match) / len(match):.2f}, lookup hits {sum(1 for p, m in look if m):d}; "
        + ", ".join(f"{m['label']} {m['tok_s']:.1f} tok/s" for m in measured)
        + f" ({time.perf_counter() - t0:.0f}s)",
        flush=True,
    )
    return trace


# ---------------------------------------------------------------------------------------------------------------------


def validate(traces: list[dict], dev: Device) -> list:
    rows = []
    for tr in traces:
        for m in tr.get("measured", []):
            sp = m["setting"]
            s = SpecSettings(sp["source"], sp["n_max"], sp["n_min"], sp["p_min"])
            pred = simulate([tr], s, tr["prompt_tokens"], dev)
            steps = replay(tr, s)
            same = list(zip(steps, m["steps"], strict=False))
            agree = sum(1 for st, ms in same if st[1] == ms[1] and st[2] == ms[2]) / max(len(same), 1)
            rows.append(
                {
                    "trace": tr["name"],
                    "setting": m["label"],
                    "measured_tok_s": m["tok_s"],
                    "predicted_tok_s": round(pred["tok_s"], 2),
                    "ratio": round(pred["tok_s"] / m["tok_s"], 3) if m["tok_s"] else None,
                    "steps_measured": len(m["steps"]),
                    "steps_predicted": len(steps),
                    "step_agreement": round(agree, 3),
                    "diverged_at": m.get("diverged_at"),
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "record":
        ap = argparse.ArgumentParser(prog="simulate.py record")
        ap.add_argument("--out", required=True)
        ap.add_argument("--max-tokens", type=int, default=128)
        ap.add_argument("--prompts", default="code,chat,copy-edit")
        ap.add_argument("--calib", default="512", help="calibration-corpus prompt lengths (comma list, '' for none)")
        ap.add_argument("--threads", type=int, default=0, help="0: all cores")
        ap.add_argument("--flash-attn", default="off", help="as the cost curve it is checked against (measure.py)")
        a = ap.parse_args(argv[1:])
        calib = [int(x) for x in a.calib.split(",") if x]
        record(a.out, a.max_tokens, a.prompts.split(","), calib, a.threads, a.flash_attn)
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces")
    ap.add_argument("--costs", required=True)
    ap.add_argument("--target", default=None, help="model name in the costs file (default: first)")
    ap.add_argument("--draft", default=None, help="draft model name in the costs file (default: second)")
    ap.add_argument("--contexts", default=None, help="comma list (default: the costs file's depths)")
    ap.add_argument("--overhead-ms", type=float, default=0.0, help="fixed per-step overhead")
    ap.add_argument("--row-ms", type=float, default=0.0, help="overhead per verified row")
    ap.add_argument("--validate", action="store_true", help="compare with the traces' measured runs")
    ap.add_argument("--engine", default=None, help="measure.py engine output: check the cost side against it")
    ap.add_argument(
        "--in-sample", action="store_true", help="calibrate on every trace (default: on the calib-* traces only)"
    )
    ap.add_argument("--json", default=None)
    ap.add_argument("--csv", default=None)
    a = ap.parse_args(argv)
    costs = json.loads(Path(a.costs).read_text())["models"]
    names = list(costs)
    tname = a.target or names[0]
    dname = a.draft or (names[1] if len(names) > 1 else None)
    target = CostCurve(costs[tname]["ms"])
    draft = CostCurve(costs[dname]["ms"]) if dname else None
    dev = Device(target, draft, a.overhead_ms, a.row_ms)
    if a.engine:
        rows = engine_check(json.loads(Path(a.engine).read_text())["runs"], dev)
        print("| context | setting | engine tok/s | tok/s over its steps | predicted tok/s | predicted/measured |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['context']} | {r['setting']} | {r['engine_tok_s']:.1f} | {r['steps_tok_s']:.1f} | "
                f"{r['predicted_tok_s']:.1f} | {r['ratio']} |"
            )
        return 0
    if not a.traces:
        ap.error("--traces is required unless --engine is given")
    traces = json.loads(Path(a.traces).read_text())["traces"]
    if a.validate:
        rows = validate(traces, dev)
        print(
            "| trace | setting | measured tok/s | predicted tok/s | predicted/measured | steps meas/pred "
            "| step agreement | output left the plain one at |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['trace']} | {r['setting']} | {r['measured_tok_s']:.2f} | {r['predicted_tok_s']:.2f} | "
                f"{r['ratio']} | {r['steps_measured']}/{r['steps_predicted']} | {r['step_agreement']} | "
                f"{'-' if r['diverged_at'] is None else 'token ' + str(r['diverged_at'])} |"
            )
        if a.json:
            Path(a.json).write_text(json.dumps({"validation": rows}, indent=1))
        return 0
    contexts = [int(x) for x in a.contexts.split(",")] if a.contexts else target.depths
    if a.in_sample:  # as on a user's machine: the frontier is measured and applied on the same kind of text
        work = cal = traces
    else:  # held out: DD and the best static setting are chosen on the calibration corpus, judged on the prompts
        work = [t for t in traces if not t["name"].startswith("calib")]
        cal = [t for t in traces if t["name"].startswith("calib")] or work
    settings = grid(draft is not None)
    table, best_static = frontier(work, cal, contexts, dev, settings)
    print(
        f"SIMULATED: traces {a.traces} ({len(work)} workload, {len(cal)} calibration), costs {a.costs} "
        f"(target {tname}, draft {dname}), overhead {a.overhead_ms} ms/step + {a.row_ms} ms/row"
    )
    print(f"best static setting (one for all contexts, chosen on calibration traces): {best_static}")
    print(
        "| Context | Static fixed setting | Static TG | DD-selected setting | DD TG | Gain vs static | "
        "best static | best static TG | DD / best static | oracle (best on workload) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    out_rows = []
    for r in table:
        w = r["workload"]
        fixed, dd, bs = w[FIXED.label()], w[r["dd"]], w[best_static]
        oracle = max(w, key=w.get)
        print(
            f"| {r['context']} | {FIXED.label()} | {fixed:.1f} tok/s | {r['dd']} | {dd:.1f} tok/s | "
            f"{(dd / fixed - 1) * 100:+.1f}% | {best_static} | {bs:.1f} tok/s | {dd / bs:.3f}x | "
            f"{oracle} {w[oracle]:.1f} |"
        )
        out_rows.append(
            {
                "context": r["context"],
                "fixed": FIXED.label(),
                "fixed_tok_s": round(fixed, 2),
                "dd_setting": r["dd"],
                "dd_tok_s": round(dd, 2),
                "gain_vs_fixed": round(dd / fixed, 4),
                "best_static": best_static,
                "best_static_tok_s": round(bs, 2),
                "dd_vs_best_static": round(dd / bs, 4),
                "oracle": oracle,
                "oracle_tok_s": round(w[oracle], 2),
                "plain_tok_s": round(w["off"], 2),
            }
        )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "simulated": True,
                    "target": tname,
                    "draft": dname,
                    "overhead_ms": a.overhead_ms,
                    "row_ms": a.row_ms,
                    "rows": out_rows,
                    "all": table,
                    "best_static": best_static,
                },
                indent=1,
            )
        )
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(["context", "setting", "workload_tok_s", "calibration_tok_s"])
            for r in table:
                for lbl, v in r["workload"].items():
                    wr.writerow([r["context"], lbl, round(v, 3), round(r["calibration"][lbl], 3)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
