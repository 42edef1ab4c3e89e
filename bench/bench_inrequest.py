"""In-request adaptation on the class workload, H200 SIMULATED: the pool warm-started from its sub-class's memory.

  python bench/bench_inrequest.py --traces bench/results/2026-12-01-classes-v3-traces.json \
      --costs bench/results/2026-11-29-h200-vulkan-fa-costs.json [--md OUT.md]

Why: v3 found that the per-prompt static oracle is only 1.055-1.087x context-only DD on this workload, so the 1.10x
goal can only be passed by adapting inside a request (a per-step source and length choice), never by a better
static pick. The engine's pool (SourcePool: lookup, draft model and plain as bandit arms, one choice per step) is
that adaptation; its source memory warm-starts it per class, and now per copy_edit sub-class.

What runs (every figure SIMULATED: the recorded CPU acceptance traces replayed on the H200 cost curves by
bench/simulate.py; nothing here ran on an H200):

* static policies as in bench_classes.py's v3 report (class-aware DD on the sub-class's calibration trace, context-
  only DD, the per-prompt static oracle over the quick grid, plain).
* the pool through the engine's own code: app.engine.memory.warm_start (sub-class key, falling back per source to
  the class's) seeds a SourcePool, simulate.replay_controlled runs it on the trace with simulated milliseconds, and
  app.engine.memory.remember blends the end state into a real SourceMemoryStore (a temp file), as a request does.
  - pool cold: no memory (the quick grid's "pool n16,p0,cost").
  - pool warm (calibration): the memory after one cold pool run on the group's calibration trace (the sub-class's
    calib-near_copy / calib-additive, else the class's), recorded under the held-out prompt's keys.
  - pool warm (served): leave-one-out; the memory after serving the other 15 held-out prompts in order (each warm
    from the memory as it then was, each under its own class / sub-class), then the prompt.
  The session-wide verify-cost table is warmed first by one uncounted cold pass over the traces, as simulate() does.
* DD now: per group, the fastest on the group's calibration trace among the quick grid plus "pool warm" (a second
  pool run on the calibration trace, warm from the first); a warm-pool pick runs as pool warm (calibration).
* lookup-first rule (not an engine setting; a modelled causal rule): lookup n7 on every step where prompt lookup has
  a proposal, else the draft model n4,p0 (fixed beforehand, not fitted here: see LOOKUP_FIRST).
* per-step ceiling: the best any per-step choice of source (plain, draft, lookup) and length (1..16) could do on
  each trace, in hindsight (dynamic programming over output positions); no policy can beat it on these traces.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_classes import HELD_OUT, _mix, calib_name, held_out_classes, simulated_rows  # noqa: E402
from simulate import CostCurve, Device, draft_step, replay_controlled, simulate, step_ms  # noqa: E402

from app.calibration.runner import candidates  # noqa: E402
from app.engine import memory  # noqa: E402
from app.policy import DraftCaps, DynamicDraftPolicy  # noqa: E402
from app.policy.content_class import class_key  # noqa: E402
from app.policy.source_memory import SourceMemoryStore  # noqa: E402
from app.speculative.adaptive import SourcePool  # noqa: E402
from app.speculative.settings import SpecSettings  # noqa: E402
from app.speculative.telemetry import SourceStats  # noqa: E402

POOL = SpecSettings("pool", 16, 0, 0.0, cost_stop=True)  # the quick grid's pool (app.calibration.runner.candidates)
POOL_PICKS = ("pool warm", POOL.label())
MAX_STEP = 16  # the engine's default draft allocation (draft_n_max_cap), the ceiling's longest draft
POLICIES = (
    "v3 DD",
    "DD 1 prompt",
    "DD now",
    "DD (engine rules)",
    "pool cold",
    "pool warm (calib)",
    "pool warm (served)",
    "lookup-first rule",
    "context-only DD",
    "oracle",
    "per-step ceiling",
    "plain",
)


def _stats(steps: list, ctx: float, dev: Device) -> dict[str, SourceStats]:
    """What the session's SpecStats would hold for a request of these simulated steps (per source)."""
    out: dict[str, SourceStats] = {}
    depth = ctx
    for st in steps:
        total = step_ms(st, depth, dev)
        verify = dev.target(st[1] + 1, depth) + dev.overhead + dev.row * (st[1] + 1)
        out.setdefault(st[0], SourceStats()).observe(st[1], st[2], total - verify, verify)
        depth += st[2] + 1
    return out


def serve(
    store: SourceMemoryStore, trace: dict, keys: tuple[str, str | None], ctx: float, dev: Device, verify_ms: dict
) -> tuple[int, float]:
    """One pool request through the engine's warm start and remember; (tokens, ms) of the trace."""
    pool = SourcePool(["draft", "lookup"], POOL.n_min, POOL.n_max, verify_ms=verify_ms)
    ws = memory.warm_start(store, keys[0], pool, None, POOL.source, keys[1])
    steps = replay_controlled(trace, POOL, ctx, dev, verify_ms, pool=pool)
    memory.remember(store, ws, pool, None, POOL.source, _stats(steps, ctx, dev))
    # the first token comes from the prompt's logits at t=0, as in simulate()
    n = 1 + sum(a + 1 for _, _, a, _ in steps)
    ms = 0.0
    depth = ctx
    for st in steps:
        ms += step_ms(st, depth, dev)
        depth += st[2] + 1
    return n, ms


LOOKUP_FIRST = (SpecSettings("lookup", 7), SpecSettings("draft", 4, 0, 0.0))
"""The rule's two settings, fixed beforehand (not fitted to the held-out prompts): lookup n7, the longest draft whose
verify (8 rows) stays below the H200 cost curves' cliff between 8 and 10 rows (static lookup n8 verifies 9 rows at
the 10-row price, ~4x an 8-row step), and copy_edit's own static pick n4,p0."""


def lookup_first(trace: dict, ctx: float, dev: Device) -> tuple[int, float]:
    """(tokens, ms) of a per-step rule the engine does not have: prompt lookup whenever it has a proposal, else the
    draft model. Causal (it reads only whether lookup proposes at this step), so a policy could run it."""
    look, drafting = LOOKUP_FIRST
    n = len(trace["output"])
    k, sync, depth, ms = 1, 1, ctx, 0.0
    while k < n:
        s = look if trace["lookup"][k][0] > 0 else drafting
        d = min(s.n_max, n - k - 1)
        drafted, accepted = draft_step(trace, k, s, d) if d > 0 else (0, 0)
        ms += step_ms((s.source if d > 0 else "none", drafted, accepted, sync), depth, dev)
        sync = 2 if (s.source == "draft" and drafted > 0 and accepted == drafted) else 1
        k += accepted + 1
        depth += accepted + 1
    return n, ms


def ceiling(trace: dict, ctx: float, dev: Device) -> tuple[int, float]:
    """(tokens, ms) of the fastest per-step choice in hindsight (source and length per step; dynamic programming)."""
    n = len(trace["output"])

    @cache
    def best(k: int, sync: int) -> float:
        if k >= n:
            return 0.0
        room = n - k - 1
        depth = ctx + k - 1
        t = step_ms(("none", 0, 0, sync), depth, dev) + best(k + 1, 1)
        if room <= 0:
            return t
        for source in ("draft", "lookup"):
            top = min(MAX_STEP, room) if source == "draft" else min(trace["lookup"][k][0], MAX_STEP, room)
            for d in range(1, top + 1):
                drafted, accepted = draft_step(trace, k, SpecSettings(source, d, 0, 0.0), d)
                if drafted == 0:
                    continue
                nxt = 2 if (source == "draft" and accepted == drafted) else 1
                t = min(t, step_ms((source, drafted, accepted, sync), depth, dev) + best(k + accepted + 1, nxt))
        return t

    sys.setrecursionlimit(max(10000, 4 * n))
    return n, best(1, 1)


def engine_policy(
    general: dict[int, dict[str, list[float]]],
    per_group: dict[int, dict[str, dict[str, list[float]]]],
    table_class: dict[str, str],
) -> DynamicDraftPolicy:
    """The engine's own DD (app.policy) over a table of these simulated calibration figures: the context-only rows
    from the general prompt, a frontier per class / sub-class from its section's prompts, at every simulated
    context; best static, noise margins (the 1 % floor; the pool's two repeats give it a spread) and fallbacks as
    the engine applies them."""
    from app.policy.fingerprint import Fingerprint
    from app.policy.table import Measurement, build_rows, new_table, ranges_from_points

    grid = {s.label(): s for s in candidates(("draft", "lookup"), "quick")}
    ranges = dict(zip(general, ranges_from_points(list(general)), strict=True))
    found = []
    for ctx, rows in general.items():
        for lbl, samples in rows.items():
            found.append(Measurement(*ranges[ctx], grid[lbl], tuple(samples), True, ctx))
        for g, by_label in per_group[ctx].items():
            for lbl, samples in by_label.items():
                found.append(Measurement(*ranges[ctx], grid[lbl], tuple(samples), True, ctx, table_class[g]))
    fp = Fingerprint("sim", "draft", "sim", "vulkan", "H200 (SIMULATED)", "sim", 65536, 999, 1, "on")
    table = new_table(fp, build_rows(found), notes="SIMULATED: bench/bench_inrequest.py")
    return DynamicDraftPolicy(table, fp)


def run(traces: list[dict], costs_path: str, target: str, draft: str, class_prompts: int = 2) -> dict:
    costs = json.loads(Path(costs_path).read_text())["models"]
    dev = Device(CostCurve(costs[target]["ms"]), CostCurve(costs[draft]["ms"]))
    grid = {s.label(): s for s in candidates(("draft", "lookup"), "quick")}
    by_name = {t["name"]: t for t in traces}
    order = [name for name, _, _ in HELD_OUT]
    detected = held_out_classes()
    work = [by_name[n] for n in order]
    v3 = {r["context"]: r for r in simulated_rows(traces, costs_path, target, draft)}

    def group(name: str) -> str:
        cls, sub = detected[name]
        return class_key(cls, sub)

    def calib_of(name: str, n_prompts: int = class_prompts) -> list[dict]:
        """The calibration prompts of the prompt's group: its sub-class's section if recorded, else its class's."""
        cls, sub = detected[name]
        section = sub if sub and f"calib-{sub}" in by_name else cls
        return [by_name[calib_name(section, k)] for k in range(n_prompts) if calib_name(section, k) in by_name]

    groups_of = {group(n): n for n in order}  # one held-out prompt per group names its keys and sections

    def tps(tr: dict, s: SpecSettings, ctx: int) -> tuple[int, float]:
        r = simulate([tr], s, ctx, dev)
        n = len(tr["output"])
        return n, n / r["tok_s"] * 1000.0 if r["tok_s"] else float("inf")

    out = []
    with tempfile.TemporaryDirectory() as tmp:

        def fresh(tag: str, ctx: int) -> SourceMemoryStore:
            return SourceMemoryStore(Path(tmp) / f"{ctx}-{tag}.json", "sim", min_interval_s=1e9)

        verify: dict[int, dict[int, float]] = {}
        for ctx in dev.target.depths:
            verify[ctx] = {}
            for tr in traces:  # the session has served requests before: its verify table is warm (uncounted)
                replay_controlled(tr, POOL, ctx, dev, verify[ctx])

        def calibrate(cal: list[dict], keys: tuple[str, str | None], ctx: int, tag: str) -> dict[str, list[float]]:
            """What the calibration (app/calibration/runner.py) measures on these prompts: each grid setting's mix
            tok/s (deterministic here, so two equal repeats), and the pool's two repeats as the runner times them:
            after one untimed run on the first prompt (it fills the empty source memory), two runs per prompt, the
            memory carried through, repeat r the mix of every prompt's r-th run."""
            scores = {lbl: [_mix([tps(c, s, ctx) for c in cal])] * 2 for lbl, s in grid.items()}
            store = fresh(f"cal-{tag}", ctx)
            serve(store, cal[0], keys, ctx, dev, verify[ctx])
            runs = [[serve(store, c, keys, ctx, dev, verify[ctx]) for _ in range(2)] for c in cal]
            scores[POOL.label()] = [_mix([r[i] for r in runs]) for i in range(2)]
            return scores

        def fastest(scores: dict[str, list[float]]) -> str:
            """The old rule: the fastest candidate on the calibration mix, the warm pool counted on its own."""
            flat = {lbl: v[0] for lbl, v in scores.items()} | {"pool warm": scores[POOL.label()][1]}
            return max(flat, key=flat.__getitem__)

        cal_now = {
            ctx: {g: calibrate(calib_of(n), detected[n], ctx, f"now-{g}") for g, n in groups_of.items()}
            for ctx in dev.target.depths
        }
        cal_one = {
            ctx: {g: calibrate(calib_of(n, 1), detected[n], ctx, f"one-{g}") for g, n in groups_of.items()}
            for ctx in dev.target.depths
        }
        general = {
            ctx: calibrate([by_name["calib-general"]], ("chat", None), ctx, "general") for ctx in dev.target.depths
        }
        engine = engine_policy(general, cal_now, {g: (detected[n][1] or detected[n][0]) for g, n in groups_of.items()})

        for ctx in dev.target.depths:
            verify_ms = verify[ctx]
            dd_now = {g: fastest(v) for g, v in cal_now[ctx].items()}
            dd_one = {g: fastest(v) for g, v in cal_one[ctx].items()}
            caps = DraftCaps(n_max=MAX_STEP, draft_loaded=True)
            dd_engine = {
                g: engine.decide(ctx, None, caps, detected[n][0], None, detected[n][1])[0].label()
                for g, n in groups_of.items()
            }
            per_prompt = {}
            for tr in work:
                name = tr["name"]
                keys = detected[name]
                timed = {lbl: tps(tr, s, ctx) for lbl, s in grid.items()}
                calib_store, one_store = fresh(f"calib-{name}", ctx), fresh(f"calib1-{name}", ctx)
                for c in calib_of(name):
                    serve(calib_store, c, keys, ctx, dev, verify_ms)
                serve(one_store, calib_of(name, 1)[0], keys, ctx, dev, verify_ms)
                served_store = fresh(f"served-{name}", ctx)
                for other in work:
                    if other["name"] != name:
                        serve(served_store, other, detected[other["name"]], ctx, dev, verify_ms)
                warm_calib = serve(calib_store, tr, keys, ctx, dev, verify_ms)
                picks = v3[ctx]["picks"][name]
                row = {
                    "v3 DD": timed[picks["class-aware DD"]],
                    "pool cold": serve(fresh(f"cold-{name}", ctx), tr, keys, ctx, dev, verify_ms),
                    "pool warm (calib)": warm_calib,
                    "pool warm (served)": serve(served_store, tr, keys, ctx, dev, verify_ms),
                    "lookup-first rule": lookup_first(tr, ctx, dev),
                    "context-only DD": timed[picks["context-only DD"]],
                    "oracle": timed[picks["oracle"]],
                    "per-step ceiling": ceiling(tr, ctx, dev),
                    "plain": timed["off"],
                }
                # A pool pick (its grid row or the warm pool) serves as the engine runs it: warm from the memory the
                # calibration's pool runs left.
                pick = dd_now[group(name)]
                row["DD now"] = warm_calib if pick in POOL_PICKS else timed[pick]
                pick = dd_engine[group(name)]
                row["DD (engine rules)"] = warm_calib if pick in POOL_PICKS else timed[pick]
                pick = dd_one[group(name)]
                row["DD 1 prompt"] = (
                    serve(one_store, tr, keys, ctx, dev, verify_ms) if pick in POOL_PICKS else timed[pick]
                )
                per_prompt[name] = row
            groups: dict[str, list[str]] = {"mix": order}
            for name in order:
                cls = detected[name][0]
                for g in dict.fromkeys((cls, group(name))):
                    groups.setdefault(g, []).append(name)
            out.append(
                {
                    "context": ctx,
                    "dd_now_picks": dd_now,
                    "dd_engine_picks": dd_engine,
                    "dd_one_prompt_picks": dd_one,
                    "groups": {
                        g: {p: _mix([per_prompt[n][p] for n in names]) for p in POLICIES}
                        for g, names in sorted(groups.items(), key=lambda kv: (kv[0] != "mix", kv[0]))
                    },
                    "prompts": {n: {p: round(_mix([v]), 2) for p, v in r.items()} for n, r in per_prompt.items()},
                }
            )
    return {"costs": costs_path, "target": target, "draft": draft, "class_prompts": class_prompts, "contexts": out}


HEAD = (
    "| context | group | " + " | ".join(f"{p} tok/s" for p in POLICIES) + " | DD now / context-only | DD now / oracle "
    "| DD now / plain | pool warm (calib) / v3 DD | ceiling / context-only |"
)


def markdown(result: dict) -> str:
    lines = [
        f"SIMULATED (H200 cost curves {result['costs']}, target {result['target']}, draft {result['draft']}; "
        "acceptance from the recorded CPU traces)",
        "",
        HEAD,
        "|" + "---|" * (HEAD.count("|") - 1),
    ]
    for r in result["contexts"]:
        for g, m in r["groups"].items():
            cells = " | ".join(f"{m[p]:.2f}" for p in POLICIES)
            lines.append(
                f"| {r['context']} | {g} | {cells} | {m['DD now'] / m['context-only DD']:.3f} | "
                f"{m['DD now'] / m['oracle']:.3f} | {m['DD now'] / m['plain']:.3f} | "
                f"{m['pool warm (calib)'] / m['v3 DD']:.3f} | {m['per-step ceiling'] / m['context-only DD']:.3f} |"
            )
    lines.append("")
    for r in result["contexts"]:
        lines.append(f"- context {r['context']}: DD now picks {r['dd_now_picks']}")
        lines.append(f"- context {r['context']}: DD under the engine's rules picks {r['dd_engine_picks']}")
        lines.append(f"- context {r['context']}: DD on 1 prompt per class picks {r['dd_one_prompt_picks']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", required=True)
    ap.add_argument("--costs", required=True)
    ap.add_argument("--target", default="q32b+fa")
    ap.add_argument("--draft", default="q05b+fa")
    ap.add_argument("--md", default=None)
    ap.add_argument("--class-prompts", type=int, default=2, help="calibration prompts per class (quick: 2)")
    args = ap.parse_args(argv)
    traces = json.loads(Path(args.traces).read_text())["traces"]
    result = run(traces, args.costs, args.target, args.draft, args.class_prompts)
    text = markdown(result)
    print(text)
    if args.md:
        Path(args.md).write_text(text)
        Path(args.md).with_suffix(".json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
