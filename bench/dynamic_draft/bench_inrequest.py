"""Class-aware DD and in-request adaptation on the class workload, H200 SIMULATED, decided by the engine's rules.

  python -m bench.dynamic_draft.bench_inrequest --traces bench/results/2026-12-02-classes-v5-traces.json \
      --costs bench/results/2026-11-29-h200-vulkan-fa-costs.json [--class-prompts N] [--md OUT.md]

Why: issue 21's goals (class-aware DD >= 1.10x context-only DD and >= 0.98x the per-prompt oracle on a mixed
workload) compare policies that differ in what they pick per class and in how the pool adapts inside a request;
both are modelled here as the engine runs them.

What runs (every figure SIMULATED: the recorded CPU acceptance traces replayed on the H200 cost curves by
bench/lib/simulate.py; nothing here ran on an H200):

* One engine session per context: its verify cost table (Session._verify_ms, shared by every request and setting) is
  warmed by one uncounted pass over the traces with every controlled setting, so the cost stop does not rediscover
  each batch size (the H200's 8-to-10-row cliff among them) on every prompt, as it would not in the engine.
* A calibration per context as app/calibration/runner.py runs it, into one source memory: every quick-grid setting
  on the general prompt (context-only rows) and on each group's first N class prompts; the pool timed warm.
* DD's picks are the engine's own DynamicDraftPolicy over a table of those figures (engine_policy): "DD (engine
  rules)" with N = --class-prompts, "DD 1 prompt" with N = 1, "context-only DD" with the class left out. A pool
  pick runs warm from a copy of the source memory the calibration left, as the engine serves it.
* DD served in order: the 16 held-out prompts as one stream (one class after another, then the same stream
  reversed; each prompt's two runs summed), each pool pick warm from the memory the calibration and every earlier
  request left: what a user of the app gets.
* DD first request, no cost memory: each prompt as the first request of a fresh session whose verify cost table
  starts empty (the engine before it kept the table in the source memory, and any restart without it); the other DD
  columns start from the remembered table.
* the pool alone through the engine's own code: app.engine.memory.warm_start (sub-class key, falling back per source
  to the class's) seeds a SourcePool, simulate.replay_controlled runs it, and app.engine.memory.remember blends the
  end state into a real SourceMemoryStore (a temp file), as a request does.
  - pool cold: no memory (the quick grid's "pool n16,p0,cost").
  - pool warm (calib): from the memory the calibration left.
  - pool warm (served): leave-one-out; the memory after serving the other 15 held-out prompts in order, then the
    prompt (not causal: an upper reference for the memory).
* oracle: per prompt the fastest quick-grid setting (the cold pool included); best static: the same without it.
* lookup-first rule (not an engine setting; a modelled causal rule): lookup n7 on every step where prompt lookup has
  a proposal, else the draft model n4,p0 (fixed beforehand, not fitted here: see LOOKUP_FIRST).
* per-step ceiling: the best any per-step choice of source (plain, draft, lookup) and length (1..16) could do on
  each trace, in hindsight (dynamic programming over output positions); no policy can beat it on these traces.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

from app.calibration.runner import candidates
from app.engine import memory
from app.policy import DraftCaps, DynamicDraftPolicy
from app.policy.content_class import class_key
from app.policy.source_memory import SourceMemoryStore
from app.speculative.pool import SourcePool
from app.speculative.settings import SpecSettings
from app.speculative.telemetry import SourceStats
from bench.lib import stats
from bench.lib.held_out import HELD_OUT, calib_name, held_out_classes, interleaved
from bench.lib.simulate import (
    CostCurve,
    Device,
    catch_up_rate,
    draft_step,
    replay_controlled,
    session_table,
    simulate,
    step_ms,
)

POOL = SpecSettings("pool", 16, 0, 0.0, cost_stop=True)  # the quick grid's pool (app.calibration.runner.candidates)
MAX_STEP = 16  # the engine's default draft allocation (draft_n_max_cap), the ceiling's longest draft
MAX_TOKENS = 96  # the held-out requests' max_tokens (the traces' generation length; a few stopped sooner)
IGNORED = "DD, catch-up ignored"  # first turns only: DD's picks before it weighed the draft's catch-up
POLICIES = (
    "DD 1 prompt",
    "DD (engine rules)",
    "DD served in order",
    "DD first request, no cost memory",
    "pool cold",
    "pool warm (calib)",
    "pool warm (served)",
    "lookup-first rule",
    "context-only DD",
    "oracle",
    "best static",
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
    store: SourceMemoryStore,
    trace: dict,
    keys: tuple[str, str | None],
    ctx: float,
    dev: Device,
    verify_ms: dict,
    first_turn: bool = False,
) -> tuple[int, float]:
    """One pool request through the engine's warm start and remember; (tokens, ms) of the trace. `first_turn`: the
    draft model has not seen the prompt (see simulate.replay_controlled)."""
    pool = SourcePool(["draft", "lookup"], POOL.n_min, POOL.n_max, verify_ms=verify_ms)
    ws = memory.warm_start(store, keys[0], pool, None, POOL.source, keys[1])
    behind = int(ctx) if first_turn and dev.draft_prefill is not None else 0
    steps = replay_controlled(trace, POOL, ctx, dev, verify_ms, pool=pool, behind=behind)
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


def lookup_first(trace: dict, ctx: float, dev: Device, first_turn: bool = False) -> tuple[int, float]:
    """(tokens, ms) of a per-step rule the engine does not have: prompt lookup whenever it has a proposal, else the
    draft model. Causal (it reads only whether lookup proposes at this step), so a policy could run it."""
    look, drafting = LOOKUP_FIRST
    n = len(trace["output"])
    k, sync, depth, ms = 1, 1, ctx, 0.0
    behind = int(ctx) if first_turn and dev.draft_prefill is not None else 0
    while k < n:
        s = look if trace["lookup"][k][0] > 0 else drafting
        d = min(s.n_max, n - k - 1)
        drafted, accepted = draft_step(trace, k, s, d) if d > 0 else (0, 0)
        runs_draft = s.source == "draft" and d > 0
        ms += step_ms(
            (s.source if d > 0 else "none", drafted, accepted, sync + (behind if runs_draft else 0)), depth, dev
        )
        sync = 2 if (s.source == "draft" and drafted > 0 and accepted == drafted) else 1
        behind = 0 if runs_draft else (behind + accepted + 1 if behind else 0)
        k += accepted + 1
        depth += accepted + 1
    return n, ms


def ceiling(trace: dict, ctx: float, dev: Device, first_turn: bool = False) -> tuple[int, float]:
    """(tokens, ms) of the fastest per-step choice in hindsight (source and length per step; dynamic programming).
    `first_turn`: the draft model's first draft decodes every token before it (the prompt and the reply so far)."""
    n = len(trace["output"])
    fresh = first_turn and dev.draft_prefill is not None

    @cache
    def best(k: int, sync: int, caught: bool = not fresh) -> float:
        if k >= n:
            return 0.0
        room = n - k - 1
        depth = ctx + k - 1
        t = step_ms(("none", 0, 0, sync), depth, dev) + best(k + 1, 1, caught)
        if room <= 0:
            return t
        for source in ("draft", "lookup"):
            top = min(MAX_STEP, room) if source == "draft" else min(trace["lookup"][k][0], MAX_STEP, room)
            for d in range(1, top + 1):
                drafted, accepted = draft_step(trace, k, SpecSettings(source, d, 0, 0.0), d)
                if drafted == 0:
                    continue
                nxt = 2 if (source == "draft" and accepted == drafted) else 1
                head = sync if caught or source != "draft" else sync + int(ctx) + k - 1
                after = caught or source == "draft"
                t = min(t, step_ms((source, drafted, accepted, head), depth, dev) + best(k + accepted + 1, nxt, after))
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


def run(
    traces: list[dict], costs_path: str, target: str, draft: str, class_prompts: int = 2, first_turn: bool = False
) -> dict:
    """`first_turn`: every held-out request is a conversation's first turn, so the draft model must prefill the
    prompt before its first draft (priced by simulate.catch_up_rate); the calibration runs stay warm, as the
    runner's do (its candidates follow each other on one prompt, so the draft's KV already holds it)."""
    costs = json.loads(Path(costs_path).read_text())["models"]
    prefill = catch_up_rate(costs[draft]) if first_turn else None
    dev = Device(CostCurve(costs[target]["ms"]), CostCurve(costs[draft]["ms"]), draft_prefill=prefill)
    ft = first_turn
    policies = (*POLICIES, IGNORED) if ft else POLICIES
    grid = {s.label(): s for s in candidates(("draft", "lookup"), "quick")}
    by_name = {t["name"]: t for t in traces}
    order = [name for name, _, _ in HELD_OUT]
    stream = [name for name, _, _ in interleaved()]  # the order DD serves them in: one class after another
    detected = held_out_classes()
    work = [by_name[n] for n in order]

    def group(name: str) -> str:
        cls, sub = detected[name]
        return class_key(cls, sub)

    def calib_of(name: str, n_prompts: int = class_prompts) -> list[dict]:
        """The calibration prompts of the prompt's group: its sub-class's section if recorded, else its class's."""
        cls, sub = detected[name]
        section = sub if sub and f"calib-{sub}" in by_name else cls
        return [by_name[calib_name(section, k)] for k in range(n_prompts) if calib_name(section, k) in by_name]

    groups_of = {group(n): n for n in order}  # one held-out prompt per group names its keys and sections
    table_class = {g: (detected[n][1] or detected[n][0]) for g, n in groups_of.items()}
    caps = DraftCaps(n_max=MAX_STEP, draft_loaded=True)
    no_draft = DraftCaps(n_max=MAX_STEP, draft_loaded=False)

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        made = iter(range(1 << 30))

        def fresh(tag: str, ctx: int, like: SourceMemoryStore | None = None) -> SourceMemoryStore:
            """An empty source memory, or a copy of `like` (what the engine's store holds at that moment)."""
            path = Path(tmp) / f"{ctx}-{tag}-{next(made)}.json"
            if like is not None:
                like.flush()
                if like.path.exists():
                    shutil.copyfile(like.path, path)
            return SourceMemoryStore(path, "sim", min_interval_s=1e9)

        # The engine session's verify cost table (Session._verify_ms): one per session, shared by every request and
        # setting. Before the calibration's timed runs it has served requests, so every batch size the cost stop
        # and the controllers reach is measured: one uncounted pass over the traces with each controlled setting.
        session = {ctx: session_table(traces, grid.values(), ctx, dev) for ctx in dev.target.depths}

        def tps(tr: dict, s: SpecSettings, ctx: int, turn: bool = False) -> tuple[int, float]:
            r = simulate([tr], s, ctx, dev, session[ctx], first_turn=turn)
            n = len(tr["output"])
            return n, n / r["tok_s"] * 1000.0 if r["tok_s"] else float("inf")

        def calibrate(cal: list[dict], keys: tuple[str, str | None], ctx: int, store: SourceMemoryStore) -> dict:
            """What the calibration (app/calibration/runner.py) measures on these prompts: each grid setting's mix
            tok/s (deterministic here, so two equal repeats), and the pool's two repeats as the runner times them:
            after one untimed run on the first prompt (it fills the empty source memory), two runs per prompt, the
            memory carried through, repeat r the mix of every prompt's r-th run."""
            scores = {lbl: [stats.mix([tps(c, s, ctx) for c in cal])] * 2 for lbl, s in grid.items()}
            serve(store, cal[0], keys, ctx, dev, session[ctx])
            runs = [[serve(store, c, keys, ctx, dev, session[ctx]) for _ in range(2)] for c in cal]
            scores[POOL.label()] = [stats.mix([r[i] for r in runs]) for i in range(2)]
            return scores

        # One calibration per context and prompt count, every class into one store, as the runner fills the
        # engine's source memory; the general prompt gives the context-only rows.
        cal: dict[int, dict[int, tuple[dict, dict]]] = {}
        stores: dict[int, dict[int, SourceMemoryStore]] = {}
        for n_prompts in dict.fromkeys((1, class_prompts)):
            for ctx in dev.target.depths:
                store = fresh(f"cal{n_prompts}", ctx)
                general = calibrate([by_name["calib-general"]], ("chat", None), ctx, store)
                per_group = {
                    g: calibrate(calib_of(n, n_prompts), detected[n], ctx, store) for g, n in groups_of.items()
                }
                cal.setdefault(n_prompts, {})[ctx] = (general, per_group)
                stores.setdefault(n_prompts, {})[ctx] = store
        engines = {
            k: engine_policy({c: v[0] for c, v in by_ctx.items()}, {c: v[1] for c, v in by_ctx.items()}, table_class)
            for k, by_ctx in cal.items()
        }

        for ctx in dev.target.depths:

            def decide(k: int, name: str | None, ctx: int = ctx, weigh: bool = True) -> str:
                """DD's pick, as Session makes it: on a first turn a fixed draft pick is weighed against the draft's
                catch-up (DynamicDraftPolicy.weigh_catch_up), priced here at the simulated prefill rate."""
                keys = detected[name] if name else (None, None)
                s, rec = engines[k].decide(ctx, None, caps, keys[0], None, keys[1])
                if weigh and prefill is not None:
                    s, rec = engines[k].weigh_catch_up(s, rec, caps, no_draft, prefill(ctx) * ctx, MAX_TOKENS)
                return s.label()

            def as_served(pick: str, tr: dict, store: SourceMemoryStore, timed: dict, ctx: int = ctx) -> tuple:
                """A pick as the engine serves it: a pool pick warm from `store` (and into it), else its static row."""
                if pick == POOL.label():
                    return serve(store, tr, detected[tr["name"]], ctx, dev, session[ctx], ft)
                return timed[pick]

            def first_of_session(pick: str, tr: dict, ctx: int = ctx) -> tuple:
                """A pick as the first request of a session with an empty verify cost table (a restart, or any
                `dynadraft generate`, without the remembered costs): the cost stop learns the sizes as it goes."""
                if pick == POOL.label():
                    return serve(calibrated(), tr, detected[tr["name"]], ctx, dev, {}, ft)
                n = len(tr["output"])
                return n, n / simulate([tr], grid[pick], ctx, dev, {}, first_turn=ft)["tok_s"] * 1000.0

            def calibrated(k: int = class_prompts, ctx: int = ctx) -> SourceMemoryStore:
                """A copy of the source memory a calibration of k prompts per class left, before any request."""
                return fresh("calibrated", ctx, stores[k][ctx])

            picks = {k: {g: decide(k, n) for g, n in groups_of.items()} for k in engines}
            unweighed = {g: decide(class_prompts, n, weigh=False) for g, n in groups_of.items()}
            context_pick = decide(class_prompts, None)
            timed_all = {tr["name"]: {lbl: tps(tr, s, ctx, ft) for lbl, s in grid.items()} for tr in work}
            # DD as a user gets it: the held-out prompts in one stream, each pool pick warm from the store the
            # calibration left and every earlier request has added to.
            in_order: dict[str, tuple[int, float]] = {}
            for seq in (stream, stream[::-1]):
                live = calibrated()
                for name in seq:
                    got = as_served(picks[class_prompts][group(name)], by_name[name], live, timed_all[name])
                    prev = in_order.get(name)
                    in_order[name] = got if prev is None else (prev[0] + got[0], prev[1] + got[1])
            per_prompt = {}
            for tr in work:
                name = tr["name"]
                keys = detected[name]
                timed = timed_all[name]
                served_store = fresh(f"served-{name}", ctx)
                for other in work:
                    if other["name"] != name:
                        serve(served_store, other, detected[other["name"]], ctx, dev, session[ctx], ft)
                statics = {k: v for k, v in timed.items() if k != POOL.label()}
                oracle = min(timed, key=lambda k: timed[k][1] / timed[k][0])
                row = {
                    "DD 1 prompt": as_served(picks[1][group(name)], tr, calibrated(1), timed),
                    "DD (engine rules)": as_served(picks[class_prompts][group(name)], tr, calibrated(), timed),
                    "DD served in order": in_order[name],
                    "DD first request, no cost memory": first_of_session(picks[class_prompts][group(name)], tr),
                    "pool cold": serve(fresh(f"cold-{name}", ctx), tr, keys, ctx, dev, session[ctx], ft),
                    "pool warm (calib)": serve(calibrated(), tr, keys, ctx, dev, session[ctx], ft),
                    "pool warm (served)": serve(served_store, tr, keys, ctx, dev, session[ctx], ft),
                    "lookup-first rule": lookup_first(tr, ctx, dev, ft),
                    "context-only DD": as_served(context_pick, tr, calibrated(), timed),
                    "oracle": timed[oracle],
                    "best static": statics[min(statics, key=lambda k: statics[k][1] / statics[k][0])],
                    "per-step ceiling": ceiling(tr, ctx, dev, ft),
                    "plain": timed["off"],
                }
                if ft:
                    row[IGNORED] = as_served(unweighed[group(name)], tr, calibrated(), timed)
                per_prompt[name] = row
            groups: dict[str, list[str]] = {"mix": order}
            for name in order:
                cls = detected[name][0]
                for g in dict.fromkeys((cls, group(name))):
                    groups.setdefault(g, []).append(name)
            out.append(
                {
                    "context": ctx,
                    "dd_engine_picks": picks[class_prompts],
                    **({"dd_picks_catch_up_ignored": unweighed} if ft else {}),
                    "dd_one_prompt_picks": picks[1],
                    "context_only_pick": context_pick,
                    "groups": {
                        g: {p: stats.mix([per_prompt[n][p] for n in names]) for p in policies}
                        for g, names in sorted(groups.items(), key=lambda kv: (kv[0] != "mix", kv[0]))
                    },
                    "prompts": {n: {p: round(stats.mix([v]), 2) for p, v in r.items()} for n, r in per_prompt.items()},
                }
            )
    return {
        "costs": costs_path,
        "target": target,
        "draft": draft,
        "class_prompts": class_prompts,
        "first_turn": first_turn,
        "contexts": out,
    }


def head(policies: list[str]) -> str:
    return (
        "| context | group | " + " | ".join(f"{p} tok/s" for p in policies) + " | DD / context-only | DD / oracle "
        "| DD / plain | DD in order / oracle | DD in order / context-only | ceiling / context-only |"
    )


def markdown(result: dict) -> str:
    """The result as a markdown table; "DD" is the engine's rules over the quick calibration, served warm."""
    policies = list(result["contexts"][0]["groups"]["mix"])
    header = head(policies)
    lines = [
        f"SIMULATED (H200 cost curves {result['costs']}, target {result['target']}, draft {result['draft']}; "
        "acceptance from the recorded CPU traces)"
        + (
            "; FIRST TURNS: the draft model prefills each held-out prompt before its first draft (ms per token from "
            "the draft's two deepest prefill points, simulate.catch_up_rate); calibration warm"
            if result.get("first_turn")
            else ""
        ),
        "",
        header,
        "|" + "---|" * (header.count("|") - 1),
    ]
    for r in result["contexts"]:
        for g, m in r["groups"].items():
            cells = " | ".join(f"{m[p]:.2f}" for p in policies)
            dd, live, base = m["DD (engine rules)"], m["DD served in order"], m["context-only DD"]
            lines.append(
                f"| {r['context']} | {g} | {cells} | {dd / base:.3f} | {dd / m['oracle']:.3f} | {dd / m['plain']:.3f} "
                f"| {live / m['oracle']:.3f} | {live / base:.3f} | {m['per-step ceiling'] / base:.3f} |"
            )
    lines.append("")
    for r in result["contexts"]:
        lines.append(f"- context {r['context']}: DD under the engine's rules picks {r['dd_engine_picks']}")
        if "dd_picks_catch_up_ignored" in r:
            lines.append(f"- context {r['context']}: DD ignoring the catch-up picks {r['dd_picks_catch_up_ignored']}")
        lines.append(f"- context {r['context']}: DD on 1 prompt per class picks {r['dd_one_prompt_picks']}")
        lines.append(f"- context {r['context']}: context-only DD picks {r['context_only_pick']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", required=True)
    ap.add_argument("--costs", required=True)
    ap.add_argument("--target", default="q32b+fa")
    ap.add_argument("--draft", default="q05b+fa")
    ap.add_argument("--md", default=None)
    ap.add_argument("--class-prompts", type=int, default=2, help="calibration prompts per class (quick: 2)")
    ap.add_argument("--first-turn", action="store_true", help="the draft model has not seen each held-out prompt")
    args = ap.parse_args(argv)
    traces = json.loads(Path(args.traces).read_text())["traces"]
    result = run(traces, args.costs, args.target, args.draft, args.class_prompts, args.first_turn)
    text = markdown(result)
    print(text)
    if args.md:
        Path(args.md).write_text(text)
        Path(args.md).with_suffix(".json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
