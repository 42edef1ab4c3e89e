"""SIMULATED Dynamic Draft vs fixed MTP n2,p0: measured MTP costs (bench/gpu/measure.py mtpcosts) x public acceptance.

  python -m bench.lib.simulate_mtp --costs MTP_COSTS.json [--json OUT.json] [--csv OUT.csv] [--bench MTP_BENCH.json ...]

Acceptance cannot be measured with synthetic weights, so per-position MTP acceptance comes from public reports of
Qwen3.6-35B-A3B with llama.cpp's draft-mtp (sources and the fit: bench/results/2026-12-01-h200-mtp.md):
a_i = A1 * R^(i-1) is the probability that drafted position i is accepted given positions < i were, fitted to the
aggregate acceptance at n-max 1..4 reported in ggml-org/llama.cpp PR #22673. Two scenarios: `flat` (the same at
every context) and `decay` (every a_i scaled by m(c), m = 1 up to 2k tokens and log-linear down to the value at 34k
that turns the n-max 4 aggregate rate into 0.62x its short-context value, as reported in vllm-project/vllm #47602).

Greedy, p_min 0 (a p_min needs the head's confidence per token, which no report gives), depths 1..8. One step of
depth n costs, with the measured medians at that KV depth:
  draft(n)                         MtpSource.propose of n tokens (one catch-up pair + n - 1 single decodes)
  + checkpoint save                the hybrid memory cannot drop positions: the engine saves the sequence first
  + verify(n + 1)                  one decode of [last] + n drafted tokens, logits on every row
  + P(some draft rejected) x (checkpoint load + verify(1 + accepted))   restore, then replay the accepted tokens
and yields 1 + E[accepted] tokens. Plain decoding: verify(1) per token. Two rollback cost models: `full` (the
engine today: llama_state_seq_get/set_data of the whole sequence) and `partial` (llama.cpp's PARTIAL_ONLY
checkpoint of the recurrent state, measured but not used by the engine). DD picks the fastest setting per context
(in-sample, so DD >= every static setting there by construction); `held-out` applies the settings DD picks under one
scenario to the other. `--bench` checks the cost side against the engine's own measured runs (mtpbench, random
weights, so every draft is rejected): the same formula at acceptance 0 vs the measured tok/s.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

A1, R = 0.886, 0.926  # fitted to PR #22673's aggregate rates 0.8835 / 0.815 / 0.7127 / 0.6421 at n-max 1..4
DECAY_CTX, DECAY_RATIO = 34_000, 0.62  # vllm #47602: n-max 4 acceptance ~53 % at ~34k vs 80-91 % at ~100 tokens
DEPTHS = tuple(range(1, 9))


def accept(i: int, scale: float = 1.0) -> float:
    return min(1.0, max(0.0, A1 * R ** (i - 1) * scale))


def aggregate_rate(n: int, scale: float = 1.0) -> float:
    """accepted / drafted at n-max n (the figure llama-server's timings give): E[accepted] / n."""
    p, s = 1.0, 0.0
    for i in range(1, n + 1):
        p *= accept(i, scale)
        s += p
    return s / n


def decay_scale(c: int) -> float:
    """m(c) of the `decay` scenario (see the module docstring), found by bisection at 34k."""
    import math

    if c <= 2048:
        return 1.0
    target = DECAY_RATIO * aggregate_rate(4)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if aggregate_rate(4, mid) < target else (lo, mid)
    m34 = (lo + hi) / 2
    f = min(1.0, math.log(c / 2048) / math.log(DECAY_CTX / 2048))
    return 1.0 - f * (1.0 - m34)


def step(n: int, row: dict[str, Any], scale: float, rollback: str) -> tuple[float, float]:
    """(expected tokens, expected ms) of one MTP step of depth n at a measured context row."""
    verify = {int(b): v for b, v in row["verify_ms"].items()}

    def v(b: int) -> float:
        return verify[min((x for x in verify if x >= b), default=max(verify))]

    if n == 0:
        return 1.0, row.get("plain_ms", v(1))
    draft = row["draft_ms"][str(n)]
    p = [1.0]
    for i in range(1, n + 1):
        p.append(p[-1] * accept(i, scale))
    if rollback == "snapshot":  # the engine since the fix: a rejected draft is dropped in place, nothing replayed
        return sum(p), draft + v(n + 1) + (1 - p[n]) * row["rollback_ms"][str(n)]
    save, load = rollback_costs(row)[rollback]
    restore = sum(p[k] * (1 - accept(k + 1, scale)) * (load + v(1 + k)) for k in range(n))
    return sum(p), draft + save + v(n + 1) + restore


def rollback_costs(row: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """(save, load) ms of the checkpoint rollback models a cost row measured (the snapshot-era files keep the full
    checkpoint under `full_checkpoint`)."""
    full = row.get("full_checkpoint") or {"save_ms": row["checkpoint_save_ms"], "load_ms": row["checkpoint_load_ms"]}
    return {
        "full": (full["save_ms"], full["load_ms"]),
        "partial": (row["partial_save_ms"], row["partial_load_ms"]),
        "free": (0.0, 0.0),
    }


def rollback_models(costs: dict[str, Any]) -> tuple[str, ...]:
    """The rollback models every context row of `costs` has the figures for."""
    rows = list(costs["contexts"].values())
    snap = ("snapshot",) if all("rollback_ms" in r for r in rows) else ()
    return ("full", "partial", "free", *snap)


def simulate(costs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"label": "SIMULATED", "fit": {"A1": A1, "R": R}, "rows": []}
    picks: dict[tuple[str, str], dict[int, int]] = {}
    for rollback in rollback_models(costs):
        for scenario in ("flat", "decay"):
            pick: dict[int, int] = {}
            for c_s, row in sorted(costs["contexts"].items(), key=lambda kv: int(kv[0])):
                c = int(c_s)
                scale = 1.0 if scenario == "flat" else decay_scale(c)
                tps = {}
                for n in (0, *DEPTHS):
                    toks, ms = step(n, row, scale, rollback)
                    tps[n] = 1000.0 * toks / ms
                best = max(DEPTHS, key=lambda n: tps[n])
                pick[c] = best if tps[best] > tps[0] else 0
                out["rows"].append(
                    {
                        "rollback": rollback,
                        "scenario": scenario,
                        "context": c,
                        "accept_scale": round(scale, 4),
                        "tok_s": {("off" if n == 0 else f"mtp n{n},p0"): round(t, 2) for n, t in tps.items()},
                        "dd_setting": "off" if pick[c] == 0 else f"mtp n{pick[c]},p0",
                        "dd_tok_s": round(tps[pick[c]], 2),
                        "fixed_n2_tok_s": round(tps[2], 2),
                        "dd_vs_n2": round(tps[pick[c]] / tps[2], 4),
                        "dd_vs_plain": round(tps[pick[c]] / tps[0], 4),
                        # DD restricted to MTP rows (the design note's table has no plain row)
                        "mtp_best_setting": f"mtp n{best},p0",
                        "mtp_best_vs_n2": round(tps[best] / tps[2], 4),
                    }
                )
            picks[(rollback, scenario)] = pick
    # held out: the depth DD picked under one scenario, run under the other
    for r in out["rows"]:
        other = "decay" if r["scenario"] == "flat" else "flat"
        n = picks[(r["rollback"], other)][r["context"]]
        r["held_out_setting"] = "off" if n == 0 else f"mtp n{n},p0"
        r["held_out_vs_n2"] = round(r["tok_s"][r["held_out_setting"]] / r["fixed_n2_tok_s"], 4)
    return out


def scale_for_rate(n: int, rate: float) -> float:
    """The acceptance scale at which depth n's aggregate rate is `rate` (bisection)."""
    lo, hi = 0.0, 1.0 / A1
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if aggregate_rate(n, mid) < rate else (lo, mid)
    return (lo + hi) / 2


def plain_ms_from_bench(costs: dict[str, Any], bench: dict[str, Any]) -> None:
    """Give each cost row the engine's measured plain ms per token at the nearest measured context (in place)."""
    plain = {r["context"]: 1000.0 / r["engine"]["tok_s"] for r in bench["runs"] if r["setting"] == "off"}
    for c, row in costs["contexts"].items():
        if plain:
            row["plain_ms"] = plain[min(plain, key=lambda k: abs(k - int(c)))]


def check_bench(costs: dict[str, Any], bench: dict[str, Any]) -> list[dict[str, Any]]:
    """Predicted vs measured engine tok/s per mtpbench MTP run: the engine's rollback (snapshots where the costs
    measured them, else the full checkpoint), the nearest measured context, the acceptance scale that reproduces the
    run's own accepted/drafted rate. Reads both mtpbench formats: one engine run, or medians over `runs`."""
    rollback = "snapshot" if "snapshot" in rollback_models(costs) else "full"
    out = []
    for run in bench["runs"]:
        if run["setting"] == "off" or "engine" not in run:
            continue
        c = min(costs["contexts"], key=lambda k: abs(int(k) - run["context"]))
        n = int(run["setting"].split("n")[1].split(",")[0])
        e = run["engine"]
        runs = e.get("runs") or [e]
        drafted, accepted = sum(r["draft_n"] for r in runs), sum(r["draft_n_accepted"] for r in runs)
        scale = scale_for_rate(n, accepted / drafted) if drafted else 0.0
        toks, ms = step(n, costs["contexts"][c], scale, rollback)
        pred = 1000.0 * toks / ms
        measured = run["engine"]["tok_s"]
        out.append({"context": run["context"], "cost_context": int(c), "setting": run["setting"], "rollback": rollback,
                    "predicted_tok_s": round(pred, 2), "measured_tok_s": measured,
                    "predicted_over_measured": round(pred / measured, 4)})  # fmt: skip
    return out


def snapshot_rows(costs: dict[str, Any], bench: dict[str, Any]) -> list[dict[str, Any]]:
    """The engine with snapshot rollback (no checkpoint, no replay): each measured MTP run's step time minus the
    measured draft cost gives verify(n + 1) at that context; with public acceptance (flat) that gives tok/s for the
    measured depths only (n2, n4), against plain measured in the same run. No curve is fitted beyond them."""
    by_ctx: dict[int, dict[str, dict[str, Any]]] = {}
    for r in bench["runs"]:
        by_ctx.setdefault(r["context"], {})[r["setting"]] = r["engine"]
    rows = []
    for c, runs in sorted(by_ctx.items()):
        cost = costs["contexts"][min(costs["contexts"], key=lambda k: abs(int(k) - c))]
        tps = {"off": runs["off"]["tok_s"]}
        verify = {}
        for label, e in runs.items():
            if label == "off":
                continue
            n = int(label.split("n")[1].split(",")[0])
            steps = e["predicted_n"] - e["draft_n_accepted"]  # every step emits its accepted tokens + one
            step_ms = 1000.0 * e["predicted_n"] / e["tok_s"] / steps
            verify[n + 1] = step_ms - cost["draft_ms"][str(n)]
            toks = 1.0 + n * aggregate_rate(n)  # the target's own token + E[accepted]
            tps[label] = round(1000.0 * toks / step_ms, 2)
        best = max(tps, key=lambda k: tps[k])
        n2 = tps.get("mtp n2,p0")
        rows.append({"rollback": "snapshots", "scenario": "flat", "context": c, "tok_s": tps,
                     "verify_ms_inferred": {b: round(v, 2) for b, v in verify.items()}, "dd_setting": best,
                     "dd_vs_n2": round(tps[best] / n2, 4) if n2 else None,
                     "dd_vs_plain": round(tps[best] / tps["off"], 4)})  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--costs", type=Path, required=True, help="bench/gpu/measure.py mtpcosts output")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--csv", type=Path)
    ap.add_argument("--bench", type=Path, nargs="*", help="bench/gpu/measure.py mtpbench outputs (plain costs, check)")
    ap.add_argument("--snapshots", type=Path, nargs="*", help="mtpbench outputs (engine alone) with snapshot rollback")
    args = ap.parse_args()
    costs = json.loads(args.costs.read_text())
    benches = [json.loads(b.read_text()) for b in args.bench or []]
    bench = {"runs": [r for b in benches for r in b["runs"]]}
    plain_ms_from_bench(costs, bench)
    res = simulate(costs)
    if benches:
        res["cost_check"] = check_bench(costs, bench)
        for r in res["cost_check"]:
            print(f"cost check {r['context']} {r['setting']}: predicted {r['predicted_tok_s']} tok/s, measured "
                  f"{r['measured_tok_s']} -> {r['predicted_over_measured']}")  # fmt: skip
    if args.snapshots:
        snap = {"runs": [r for b in args.snapshots for r in json.loads(b.read_text())["runs"]]}
        res["snapshot_rows"] = snapshot_rows(costs, snap)
        print("SIMULATED, snapshot rollback (step costs inferred from the engine's measured runs x public acceptance)")
        for r in res["snapshot_rows"]:
            print(f"  {r['context']}: {r['tok_s']} -> DD {r['dd_setting']} ({r['dd_vs_n2']}x n2, "
                  f"{r['dd_vs_plain']}x plain); verify ms {r['verify_ms_inferred']}")  # fmt: skip
    res["costs"] = str(args.costs.name)
    print("SIMULATED (measured costs x public acceptance); tok/s")
    cols = "rollback | acceptance | context | plain | n2,p0 | DD | DD tok/s | DD / n2 | held out / n2 | MTP-only DD"
    print(f"| {cols} |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in res["rows"]:
        print(
            f"| {r['rollback']} | {r['scenario']} | {r['context']} | {r['tok_s']['off']} | {r['fixed_n2_tok_s']} | "
            f"{r['dd_setting']} | {r['dd_tok_s']} | {r['dd_vs_n2']:.3f} | {r['held_out_vs_n2']:.3f} | "
            f"{r['mtp_best_setting']} {r['mtp_best_vs_n2']:.3f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.writer(f)
            names = ["off", *(f"mtp n{n},p0" for n in DEPTHS)]
            w.writerow(
                ["rollback", "scenario", "context", "accept_scale", *names, "dd_setting", "dd_vs_n2", "best_mtp"]
            )
            for r in res["rows"]:
                w.writerow(
                    [r["rollback"], r["scenario"], r["context"], r["accept_scale"]]
                    + [r["tok_s"][k] for k in names]
                    + [r["dd_setting"], r["dd_vs_n2"], r["mtp_best_setting"]]
                )


if __name__ == "__main__":
    main()
