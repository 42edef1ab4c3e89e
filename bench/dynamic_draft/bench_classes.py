"""Class-aware Dynamic Draft on a mixed workload: class-aware DD vs context-only DD vs the per-prompt oracle vs plain.

  python -m bench.dynamic_draft.bench_classes measure --out M.json [--threads 1] [--max-tokens 96]  # every candidate
  python -m bench.dynamic_draft.bench_classes calibrate --out T.json [--threads 1]  # quick calibration, classes
  python -m bench.dynamic_draft.bench_classes report --runs M.json --table T.json [--h200-costs C.json] [--md OUT.md]

How the comparison is made (one set of runs): `measure` runs every candidate of the quick calibration grid once on
each held-out prompt (Qwen2.5-Coder 1.5B target, 0.5B draft, greedy) and records each prompt's acceptance trace.
`report` derives every policy's pick from those same runs: plain is the "off" run; the oracle is the prompt's
fastest safe candidate (the best static setting for that prompt, known only in hindsight); class-aware DD is what
`DynamicDraftPolicy.decide(prompt_tokens, class)` picks from the calibrated table; context-only DD what it picks
with the class left out (the same table's context rows). DD's picks are among the measured candidates, so its
speed is that candidate's measured speed on the prompt. Mix figures are total tokens / total time over all prompts.

The H200 part is SIMULATED: the recorded traces (acceptance from here) replayed against the previous session's H200
cost curves (bench/lib/simulate.py), with DD's picks made on simulated calibration-prompt traces of each class.
The held-out prompts below are written for this bench; none is calibration text.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.lib import stats
from bench.lib.held_out import HELD_OUT, calib_name, held_out_classes, interleaved
from bench.lib.pair import pair_session


def _trace_messages(s, name: str):  # type: ignore[no-untyped-def]
    """The messages of a named trace: a class's calibration prompt at 512 tokens (calib_name, "calib-general")
    or a held-out prompt."""
    from app.calibration.classes import SECTIONS, class_corpus, general_corpus
    from app.calibration.runner import build_messages

    if name == "calib-general":
        return build_messages(s, 512, general_corpus())[0]
    if name.startswith("calib-"):
        cls, _, k = name.removeprefix("calib-").partition("~")
        return build_messages(s, 512, class_corpus(cls), SECTIONS[cls].instructions[int(k or 0)])[0]
    return ({"role": "user", "content": {n: u for n, _, u in HELD_OUT}[name]},)


def trace_names() -> list[str]:
    from app.calibration.classes import SECTIONS

    return [calib_name(c, k) for c in SECTIONS for k in range(len(SECTIONS[c].instructions))] + [
        "calib-general",
        *(n for n, _, _ in interleaved()),
    ]


def traces(out: str, threads: int, max_tokens: int, reuse: str | None, redo: str | None) -> None:
    """Acceptance traces (bench/lib/simulate.py record_trace) of every class's calibration prompt and every held-out
    prompt. With `reuse`, traces of an earlier file are kept unless named in `redo` (comma list) or missing there:
    a greedy trace depends on the prompt, the models and the build, not on the machine's load, so only the
    prompts that changed need recording again. Each trace says where it came from."""
    from bench.lib.simulate import record_trace

    old = {t["name"]: t for t in json.loads(Path(reuse).read_text())["traces"]} if reuse else {}
    again = set(redo.split(",")) if redo else set()
    result: dict = {"max_tokens": max_tokens, "threads": threads, "traces": []}
    s = None
    t0 = time.perf_counter()
    for name in trace_names():
        if name in old and name not in again:
            result["traces"].append(old[name] | {"origin": old[name].get("origin", f"reused from {reuse}")})
            continue
        if s is None:
            s = pair_session(threads)
        tr = record_trace(s, name, _trace_messages(s, name), max_tokens, measure=False)
        result["traces"].append(tr | {"origin": "recorded " + time.strftime("%Y-%m-%d %H:%M")})
        Path(out).write_text(json.dumps(result, indent=1))
        print(f"  {name} ({time.perf_counter() - t0:.0f}s)", flush=True)
    Path(out).write_text(json.dumps(result, indent=1))
    if s is not None:
        s.close()


def measure(out: str, threads: int, max_tokens: int, repeats: int, only: str | None) -> None:
    """Every quick-grid candidate `repeats` times per held-out prompt (or the `only` ones), interleaved: each repeat
    runs the whole grid once, so a change of machine load hits every candidate alike. Each candidate keeps every
    run; the report uses the median and shows the spread across repeats."""
    from statistics import median

    from app.calibration.runner import candidates
    from app.engine.types import DoneEvent, GenerationRequest
    from app.policy.content_class import classify, last_user_text
    from app.runtime.sampling import SamplingParams
    from app.speculative.exactness import compare_outputs
    from app.speculative.settings import PLAIN

    s = pair_session(threads)
    grid = candidates(s.sources, "quick")
    chosen = set(only.split(",")) if only else None
    result: dict = {"max_tokens": max_tokens, "threads": threads, "repeats": repeats, "grid": [g.label() for g in grid]}
    result["prompts"] = []
    greedy = SamplingParams(temperature=0.0)
    t_all = time.perf_counter()

    def save() -> None:
        Path(out).write_text(json.dumps(result, indent=1))

    for name, expected, user in interleaved():
        if chosen is not None and name not in chosen:
            continue
        msgs = ({"role": "user", "content": user},)
        text = s.render_prompt(GenerationRequest(messages=msgs))
        cls, cue = classify(text, last_user_text(msgs, None))
        n_prompt = len(s.format_prompt(GenerationRequest(messages=msgs)))
        reps: dict[str, list[dict]] = {g.label(): [] for g in grid}
        ref = None
        for _ in range(repeats):
            for setting in grid:
                req = GenerationRequest(
                    messages=msgs,
                    max_tokens=max_tokens,
                    sampling=greedy,
                    speculative=setting,
                    collect_margins=setting == PLAIN and ref is None,
                )
                summ = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
                if ref is None:
                    ref = summ  # the grid's first candidate is plain ("off")
                ok = compare_outputs(ref.tokens, ref.margins, ref.finish_reason, summ.tokens, summ.finish_reason)
                reps[setting.label()].append(
                    {
                        "tok_s": summ.timings.predicted_per_second,
                        "tokens": summ.timings.predicted_n,
                        "ms": summ.timings.predicted_ms,
                        "drafted": summ.timings.draft_n,
                        "accepted": summ.timings.draft_n_accepted,
                        "safe": ok.acceptable,
                    }
                )
        runs = {}
        for label, rs in reps.items():
            mid = sorted(rs, key=lambda r: r["tok_s"])[(len(rs) - 1) // 2]  # the (lower) median run
            tok_s = median(r["tok_s"] for r in rs)
            runs[label] = mid | {
                "tok_s": tok_s,
                "ms": mid["tokens"] / tok_s * 1000.0 if tok_s else mid["ms"],  # the mix weighs the median speed
                "safe": all(r["safe"] for r in rs),
                "repeats": rs,
            }
        entry = {"name": name, "expected": expected, "class": cls, "cue": cue, "prompt_tokens": n_prompt}
        result["prompts"].append(entry | {"runs": runs})
        line = ", ".join(f"{k} {v['tok_s']:.1f}" for k, v in runs.items())
        print(f"{name} [{cls}/{cue}] {n_prompt} tok: {line} ({time.perf_counter() - t_all:.0f}s)", flush=True)
        save()
    print(f"measured in {time.perf_counter() - t_all:.0f}s", flush=True)
    s.close()


def calibrate(
    out: str, threads: int, budget_min: float | None, contexts: str | None, classes: str | None, add_to: str | None
) -> None:
    """The quick calibration with its class sections on the pair (not saved into the user's tables: dry run);
    `contexts` restricts it (e.g. "512": the range every held-out prompt falls in, all classes measured there)."""
    from dataclasses import replace

    from app.calibration.runner import default_plan, run_calibration

    s = pair_session(threads)
    plan = default_plan(s, "quick", budget_min)
    if contexts:
        plan = replace(plan, contexts=tuple(int(c) for c in contexts.split(",")))
    if classes:
        plan = replace(plan, classes=tuple(classes.split(",")))
    if budget_min == 0:
        plan = replace(plan, budget_s=None)
    t0 = time.perf_counter()

    def show(p) -> None:  # type: ignore[no-untyped-def]
        print(f"\r  [{p.done:>3}/{p.total}] ETA {p.eta_s:5.0f}s {p.message[:60]:<60}", end="", flush=True)

    result = run_calibration(s, plan, progress=show, dry_run=True)
    print(f"\nquick calibration {time.perf_counter() - t0:.0f}s; skipped contexts {result.skipped_contexts}, "
          f"skipped class prompts {result.skipped_classes}")  # fmt: skip
    print(result.markdown)
    table = result.table
    if add_to:  # top up an earlier table of the same fingerprint with these class rows (its own rows are kept)
        from app.policy import FrontierTable, new_table

        old = FrontierTable.from_json(Path(add_to).read_text())
        assert old.fingerprint == table.fingerprint, "tables of different setups"
        fresh = [r for r in table.rows if r.content_class is not None and r.content_class in plan.classes]
        kept = [r for r in old.rows if r.content_class is None or r.content_class not in plan.classes]
        table = new_table(old.fingerprint, kept + fresh, notes=f"{old.notes}; topped up with {', '.join(plan.classes)} "
                          f"from {table.table_id} ({table.notes})")  # fmt: skip
    Path(out).write_text(table.to_json())
    s.close()


# -- report -------------------------------------------------------------------------------------------------------


POLICIES = ("class-aware DD", "context-only DD", "oracle", "plain")


def cpu_rows(runs: dict, table_json: str) -> tuple[list[dict], dict]:
    """Per prompt: each policy's pick and its measured (tokens, ms); DD's picks through DynamicDraftPolicy."""
    from app.policy import DraftCaps, DynamicDraftPolicy, FrontierTable

    table = FrontierTable.from_json(table_json)
    policy = DynamicDraftPolicy(table, table.fingerprint)
    caps = DraftCaps(n_max=16, draft_loaded=True)  # the engine's default allocation (draft_n_max_cap)
    subs = {name: sub for name, (_, sub) in held_out_classes().items()}
    rows = []
    for p in runs["prompts"]:
        r = p["runs"]
        safe = {k: v for k, v in r.items() if v["safe"]}
        sub = subs.get(p["name"]) if p["class"] == "copy_edit" else None
        aware = policy.decide(p["prompt_tokens"], None, caps, p["class"], None, sub)
        picks = {
            "class-aware DD": aware[0].label(),
            "context-only DD": policy.decide(p["prompt_tokens"], None, caps)[0].label(),
            "oracle": max(safe, key=lambda k: safe[k]["tok_s"]),
            "plain": "off",
        }
        basis = aware[1].class_basis
        missing = [v for v in picks.values() if v not in r]
        if missing:
            raise SystemExit(f"{p['name']}: DD picked {missing}, which the runs did not measure")
        rows.append(
            {
                "name": p["name"],
                "class": p["class"],
                "expected": p["expected"],
                "prompt_tokens": p["prompt_tokens"],
                "basis": basis,
                "picks": picks,
                "tok_s": {k: r[v]["tok_s"] for k, v in picks.items()},
                "cost": {k: (r[v]["tokens"], r[v]["ms"]) for k, v in picks.items()},
                "unsafe_picks": [k for k, v in picks.items() if not r[v]["safe"]],
            }
        )
    return rows, {"table_id": table.table_id, "notes": table.notes}


SIM_POLICIES = ("class-aware DD", "class-only DD", "context-only DD", "oracle", "plain")
"""The simulated comparison: class-aware DD with copy_edit's sub-classes (its sub-class's calibration trace where it
has one, else its class's), the same without sub-classes (the v2 policy), context-only DD, the oracle, plain."""


def _ceiling(timed: dict[str, dict[str, tuple[int, float]]], groups: dict[str, str]) -> tuple[dict[str, str], float]:
    """Each group's best single setting on its own held-out prompts, in hindsight, and the mix it gives: the most
    any table of those groups could do. A per-prompt oracle above it is variety within a group.
    timed: prompt -> setting -> (tokens, ms); groups: prompt -> its group."""
    best = {}
    for g in sorted(set(groups.values())):
        mine = [timed[n] for n in timed if groups[n] == g]
        best[g] = min(mine[0], key=lambda k: sum(m[k][1] for m in mine) / sum(m[k][0] for m in mine))
    return best, stats.mix([timed[n][best[groups[n]]] for n in timed])


def simulated_rows(traces: list[dict], costs_path: str, target: str, draft: str) -> list[dict]:
    """SIMULATED per context: each policy's mix tok/s from the traces on the H200 cost curves. DD's picks are made on
    the simulated calibration-prompt traces (a class's first prompts together, as many as the quick calibration
    measures): per sub-class, else per class (class-aware), per class only (class-only, as before sub-classes),
    or the general one (context-only)."""
    from app.calibration.runner import candidates, plan_for
    from bench.lib.simulate import CostCurve, Device, session_table, simulate

    costs = json.loads(Path(costs_path).read_text())["models"]
    dev = Device(CostCurve(costs[target]["ms"]), CostCurve(costs[draft]["ms"]))
    grid = candidates(("draft", "lookup"), "quick")  # the same candidates the CPU calibration measures
    class_prompts = plan_for(4096, grid, "quick", None).class_prompts  # and as many prompts per class
    by_name = {t["name"]: t for t in traces}
    work = [t for t in traces if not t["name"].startswith("calib-")]
    detected = held_out_classes()
    classes = {t["name"]: detected[t["name"]][0] for t in work}
    subs = {t["name"]: detected[t["name"]][1] for t in work}

    def group(name: str) -> str:  # the finest frontier a prompt can have: its sub-class if any, else its class
        return f"{classes[name]}/{subs[name]}" if subs[name] else classes[name]

    out = []
    for ctx in dev.target.depths:
        # The engine's verify cost table is per session, so a prompt's cost stop does not rediscover each batch size.
        session = session_table(traces, grid, ctx, dev)

        def tps(tr: dict, s, ctx: int = ctx, session: dict = session) -> tuple[int, float]:  # type: ignore[no-untyped-def]
            r = simulate([tr], s, ctx, dev, session)
            n = len(tr["output"])
            return n, n / r["tok_s"] * 1000.0 if r["tok_s"] else float("inf")

        def best_on(group: str):  # type: ignore[no-untyped-def]
            """The best candidate on a group's calibration traces taken together (total tokens / total time), as
            the engine's quick calibration combines a class's first prompts (runner.combine_runs)."""
            names = [calib_name(group, k) for k in range(class_prompts)] if group != "general" else ["calib-general"]
            mine = [by_name[n] for n in names if n in by_name]
            return max(grid, key=lambda x: stats.mix([tps(tr, x) for tr in mine]))

        general = best_on("general")
        per_class = {c: best_on(c) for c in sorted(set(classes.values()))}
        per_sub = {u: best_on(u) for u in sorted({u for u in subs.values() if u}) if f"calib-{u}" in by_name}
        picks: dict[str, list[tuple[int, float]]] = {k: [] for k in SIM_POLICIES}
        per_group: dict[str, dict[str, list[tuple[int, float]]]] = {}
        chosen = {}
        timed_all = {tr["name"]: {s.label(): tps(tr, s) for s in grid} for tr in work}

        class_ceiling, class_ceiling_mix = _ceiling(timed_all, {n: classes[n] for n in timed_all})
        sub_ceiling, sub_ceiling_mix = _ceiling(timed_all, {n: group(n) for n in timed_all})
        for tr in work:
            name = tr["name"]
            cls, sub = classes[name], subs[name]
            timed = timed_all[name]
            oracle = min(timed, key=lambda k: timed[k][1] / timed[k][0])
            sel = {
                "class-aware DD": (per_sub[sub] if sub in per_sub else per_class[cls]).label(),
                "class-only DD": per_class[cls].label(),
                "context-only DD": general.label(),
                "oracle": oracle,
                "plain": "off",
            }
            chosen[name] = sel
            for k, v in sel.items():
                picks[k].append(timed[v])
                for g in dict.fromkeys((cls, group(name))):
                    per_group.setdefault(g, {q: [] for q in SIM_POLICIES})[k].append(timed[v])
        out.append(
            {
                "context": ctx,
                "mix": {k: stats.mix(v) for k, v in picks.items()},
                "per_class": {c: {k: stats.mix(v) for k, v in m.items()} for c, m in sorted(per_group.items())},
                "dd_class_picks": {c: s.label() for c, s in per_class.items()},
                "dd_subclass_picks": {c: s.label() for c, s in per_sub.items()},
                "dd_context_pick": general.label(),
                "class_ceiling": class_ceiling,
                "ceiling_mix": class_ceiling_mix,
                "subclass_ceiling": sub_ceiling,
                "subclass_ceiling_mix": sub_ceiling_mix,
                "picks": chosen,
            }
        )
    return out


def _ratios(m: dict) -> str:
    c = m["class-aware DD"]
    return (
        f"{m['class-aware DD']:.2f} | {m['context-only DD']:.2f} | {m['oracle']:.2f} | {m['plain']:.2f} | "
        f"{c / m['context-only DD']:.3f} | {c / m['oracle']:.3f} | {c / m['plain']:.3f}"
    )


def _sim_ratios(m: dict) -> str:
    c = m["class-aware DD"]
    return (
        " | ".join(f"{m[k]:.2f}" for k in SIM_POLICIES)
        + f" | {c / m['class-only DD']:.3f} | {c / m['context-only DD']:.3f} | {c / m['oracle']:.3f} "
        f"| {c / m['plain']:.3f}"
    )


SIM_HEAD = (
    "| context | class-aware DD tok/s | class-only DD tok/s | context-only DD tok/s | oracle tok/s | plain tok/s "
    "| class-aware / class-only | / context-only | / oracle | / plain |\n|---|---|---|---|---|---|---|---|---|---|"
)

HEAD = (
    "| | class-aware DD tok/s | context-only DD tok/s | oracle tok/s | plain tok/s | class / context-only "
    "| class / oracle | class / plain |\n|---|---|---|---|---|---|---|---|"
)


def repeat_spread(runs: dict, rows: list[dict]) -> dict[str, list[list[float]]]:
    """Per group (mix and each class): the three ratios of class-aware DD computed on each repeat's runs alone, so
    the table shows how far one repeat's verdict moves from another's on this machine."""
    if runs.get("repeats", 1) < 2:
        return {}
    by_name = {p["name"]: p for p in runs["prompts"]}
    out: dict[str, list[list[float]]] = {}
    groups = {"mix": rows} | {c: [r for r in rows if r["class"] == c] for c in dict.fromkeys(r["class"] for r in rows)}
    for group, sub in groups.items():
        ratios: list[list[float]] = [[], [], []]
        for i in range(runs["repeats"]):
            m = {
                k: stats.mix(
                    [
                        (rep["tokens"], rep["ms"])
                        for r in sub
                        for rep in [by_name[r["name"]]["runs"][r["picks"][k]]["repeats"][i]]
                    ]
                )
                for k in POLICIES
            }
            c = m["class-aware DD"]
            for j, k in enumerate(("context-only DD", "oracle", "plain")):
                ratios[j].append(c / m[k])
        out[group] = ratios
    return out


def held_out_oracle(runs: dict) -> float | None:
    """The oracle's tok/s on the mix when each prompt's best candidate is picked on half of the repeats (even, then
    odd) and timed on the other half: an estimate of the per-prompt best setting that cannot pick a candidate for
    its lucky runs. The oracle of the table above picks and times on the same runs, so with a dozen candidates
    within noise of each other it is biased upward; the best setting in expectation lies between the two. None
    with fewer than 2 repeats."""
    if runs.get("repeats", 1) < 2:
        return None
    timed: list[tuple[int, float]] = []
    for p in runs["prompts"]:
        safe = {k: v["repeats"] for k, v in p["runs"].items() if v["safe"]}
        for pick_on, time_on in ((0, 1), (1, 0)):
            best = max(safe, key=lambda k: stats.mix([(r["tokens"], r["ms"]) for r in safe[k][pick_on::2]]))
            timed += [(r["tokens"], r["ms"]) for r in safe[best][time_on::2]]
    return stats.mix(timed)


def report(
    runs_path: str, table_path: str, traces_path: str | None, costs: str | None, target: str, draft: str, md: str | None
) -> None:
    runs = json.loads(Path(runs_path).read_text())
    rows, info = cpu_rows(runs, Path(table_path).read_text())
    lines = [
        f"CPU, measured: {len(rows)} held-out prompts, {runs['max_tokens']} tokens greedy, --threads "
        f"{runs['threads']}; every candidate of the quick grid ran {runs.get('repeats', 1)}x per prompt (interleaved), "
        f"and every policy's figure is its pick's median (DD picks among the measured candidates). Table "
        f"{info['table_id']} ({info['notes']}).",
        "",
        "| prompt | class (expected) | prompt tokens | class-aware DD | context-only DD | oracle | plain "
        "| class row? |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cell = {k: f"{r['picks'][k]} {r['tok_s'][k]:.2f}" for k in POLICIES}
        flag = " (unsafe: " + ", ".join(r["unsafe_picks"]) + ")" if r["unsafe_picks"] else ""
        lines.append(
            f"| {r['name']} | {r['class']} ({r['expected']}) | {r['prompt_tokens']} | {cell['class-aware DD']} | "
            f"{cell['context-only DD']} | {cell['oracle']} | {cell['plain']} | {r['basis']}{flag} |"
        )
    lines += ["", HEAD]
    mix = {k: stats.mix([r["cost"][k] for r in rows]) for k in POLICIES}
    lines.append(f"| mix | {_ratios(mix)} |")
    for cls in dict.fromkeys(r["class"] for r in rows):
        sub = [r for r in rows if r["class"] == cls]
        lines.append(f"| {cls} | {_ratios({k: stats.mix([r['cost'][k] for r in sub]) for k in POLICIES})} |")
    spread = repeat_spread(runs, rows)
    if spread:
        lines += [
            "",
            f"Spread over the {runs['repeats']} repeats (each repeat's runs alone, the same picks): class-aware DD / "
            "context-only DD, / oracle, / plain; min-max:",
            "",
            "| | class / context-only | class / oracle | class / plain |",
            "|---|---|---|---|",
        ]
        for group, rs in spread.items():
            lines.append("| " + group + " | " + " | ".join(f"{min(v):.3f}-{max(v):.3f}" for v in rs) + " |")
    fair = held_out_oracle(runs)
    if fair is not None:
        c = mix["class-aware DD"]
        lines += [
            "",
            f"Oracle picked on half the repeats and timed on the other half (held_out_oracle): {fair:.2f} tok/s on "
            f"the mix; class-aware DD / that = {c / fair:.3f}, against {c / mix['oracle']:.3f} for the oracle that "
            "picks and times on the same runs. The best setting in expectation lies between the two.",
        ]
    result: dict = {"cpu": {"rows": rows, "mix": mix, "table": info, "spread": spread, "held_out_oracle": fair}}
    if costs:
        all_traces = json.loads(Path(traces_path).read_text())["traces"] if traces_path else runs["traces"]
        sim = simulated_rows(all_traces, costs, target, draft)
        result["simulated"] = {"costs": costs, "target": target, "draft": draft, "contexts": sim}
        lines += [
            "",
            f"SIMULATED (H200 cost curves {costs}, target {target}, draft {draft}; acceptance from the CPU traces "
            "recorded here; DD picks on the simulated calibration-prompt traces; class-aware DD decides on "
            "copy_edit's sub-class where it has one, class-only DD on the class alone, as before sub-classes):",
            "",
            SIM_HEAD,
        ]
        for r in sim:
            lines.append(f"| {r['context']} mix | {_sim_ratios(r['mix'])} |")
            for cls, m in r["per_class"].items():
                lines.append(f"| {r['context']} {cls} | {_sim_ratios(m)} |")
        lines.append("")
        for r in sim:
            ctx_dd = r["mix"]["context-only DD"]
            lines.append(
                f"- context {r['context']}: class-aware DD picks {r['dd_class_picks']} and for the sub-classes "
                f"{r['dd_subclass_picks']}; context-only DD picks {r['dd_context_pick']}. Best in hindsight per "
                f"class {r['class_ceiling']}: mix {r['ceiling_mix']:.2f} tok/s = {r['ceiling_mix'] / ctx_dd:.3f}x "
                f"context-only DD; per sub-class {r['subclass_ceiling']}: mix {r['subclass_ceiling_mix']:.2f} tok/s "
                f"= {r['subclass_ceiling_mix'] / ctx_dd:.3f}x (the most any table of these groups could gain); "
                f"oracle = {r['mix']['oracle'] / ctx_dd:.3f}x context-only DD; class-aware DD at "
                f"{r['mix']['class-aware DD'] / r['subclass_ceiling_mix']:.3f}x of the sub-class ceiling"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    if md:
        Path(md).write_text(text)
        Path(md).with_suffix(".json").write_text(json.dumps(result, indent=1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", required=True)
    m.add_argument("--threads", type=int, default=1)
    m.add_argument("--max-tokens", type=int, default=96)
    m.add_argument("--repeats", type=int, default=2)
    m.add_argument("--only", default=None, help="comma list of held-out prompt names (default: all)")
    t = sub.add_parser("traces")
    t.add_argument("--out", required=True)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--max-tokens", type=int, default=96)
    t.add_argument("--reuse", default=None, help="an earlier traces (or measure) file: keep its traces")
    t.add_argument("--redo", default=None, help="comma list of trace names to record again even if reused")
    c = sub.add_parser("calibrate")
    c.add_argument("--out", required=True)
    c.add_argument("--threads", type=int, default=1)
    c.add_argument("--budget-min", type=float, default=None, help="0: no budget")
    c.add_argument("--contexts", default=None)
    c.add_argument("--classes", default=None, help="comma list (default: every class)")
    c.add_argument("--add-to", default=None, help="an earlier table: keep its rows, replace these classes' rows")
    r = sub.add_parser("report")
    r.add_argument("--runs", required=True)
    r.add_argument("--table", required=True)
    r.add_argument("--traces", default=None, help="the traces file (default: the runs file's traces)")
    r.add_argument("--h200-costs", default=None)
    r.add_argument("--target", default="q32b+fa")
    r.add_argument("--draft", default="q05b+fa")
    r.add_argument("--md", default=None)
    args = ap.parse_args(argv)
    if args.cmd == "measure":
        measure(args.out, args.threads, args.max_tokens, args.repeats, args.only)
    elif args.cmd == "traces":
        traces(args.out, args.threads, args.max_tokens, args.reuse, args.redo)
    elif args.cmd == "calibrate":
        calibrate(args.out, args.threads, args.budget_min, args.contexts, args.classes, args.add_to)
    else:
        report(args.runs, args.table, args.traces, args.h200_costs, args.target, args.draft, args.md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
