"""As shipped vs plain: fresh `dynadraft generate` processes with default flags against `--no-spec`, per prompt class.

What a user gets with no table and no flags: the engine default for what is loaded (a draft model's llama-server
defaults, else the model's MTP head, else plain decoding), a fixed one under the in-request guard. Each held-out prompt
(bench/lib/held_out.py: chat, code, copy-edit, structured) runs once per mode per repeat, the modes interleaved and
their order alternating, in fresh processes (load time is not counted: tok/s is the generation's own). Greedy by
default; `--temperature 0.7` for the sampled regime. Prints per prompt the median tok/s of each mode, the ratio, what
the default drafted and accepted and what the guard did, then per class and overall the geometric mean of the ratios.

    .venv/bin/python -m bench.engine.bench_defaults [--model PATH] [--repeats 3] [--max-tokens 96] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.lib.held_out import HELD_OUT

MODES = {"default": [], "plain": ["--no-spec"]}


def _generate(model: str, message: str, flags: list[str], args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "app", "generate", "--model", model, "--prompt", message, "--json"]
    cmd += ["--max-tokens", str(args.max_tokens), "--temperature", str(args.temperature), "--seed", "1", *flags]
    # A data folder of its own: no calibration table and no source memory, as on a first launch.
    env = os.environ | {"DYNADRAFT_HOME": args.home}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])}...: {out.stderr.strip()[-400:]}")
    summary: dict[str, Any] = json.loads(out.stdout)
    return summary


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for name, klass, message in HELD_OUT:
        if args.only and not name.startswith(tuple(args.only.split(","))):
            continue
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
        for r in range(args.repeats):
            order = list(MODES) if r % 2 == 0 else list(reversed(MODES))  # alternate who goes first
            for mode in order:
                runs[mode].append(_generate(args.model, message, MODES[mode], args))
        tok_s = {m: statistics.median(s["timings"]["predicted_per_second"] for s in runs[m]) for m in MODES}
        last = runs["default"][-1]
        dd = last.get("dynamic_draft") or {}
        row = {
            "prompt": name,
            "class": klass,
            "default_tok_s": tok_s["default"],
            "plain_tok_s": tok_s["plain"],
            "ratio": tok_s["default"] / tok_s["plain"],
            "setting": last["speculative"],
            "default_basis": dd.get("default_basis"),
            "drafted": [s["timings"]["draft_n"] for s in runs["default"]],
            "accepted": [s["timings"]["draft_n_accepted"] for s in runs["default"]],
            "guard": [len([e for e in (s.get("dynamic_draft") or {}).get("guard", []) if e["action"] == "plain"])
                      for s in runs["default"]],
        }  # fmt: skip
        rows.append(row)
        print(
            f"{name:<16} {klass:<10} default {row['default_tok_s']:6.1f}  plain {row['plain_tok_s']:6.1f}  "
            f"x{row['ratio']:.3f}  drafted {row['drafted']} accepted {row['accepted']} guard pauses {row['guard']}",
            flush=True,
        )
    return rows


def report(rows: list[dict[str, Any]]) -> None:
    classes = sorted({r["class"] for r in rows})
    for c in classes:
        ratios = [r["ratio"] for r in rows if r["class"] == c]
        print(f"{c:<10} default ÷ plain (geomean of {len(ratios)}): {_geomean(ratios):.3f}")
    print(f"{'all':<10} default ÷ plain (geomean of {len(rows)}): {_geomean([r['ratio'] for r in rows]):.3f}")


def main(argv: list[str] | None = None) -> int:
    from app.models.packaged import ensure_model

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a GGUF (default: the demo model, SmolLM2-135M, with no draft and no table)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--json", type=Path, help="write the rows here")
    p.add_argument("--only", help="prompt name prefixes, comma-separated (e.g. chat,edit)")
    args = p.parse_args(argv)
    args.model = args.model or str(ensure_model("smollm2-135m"))
    with tempfile.TemporaryDirectory(prefix="dd-bench-home-") as home:
        args.home = home
        rows = measure(args)
    report(rows)
    if args.json:
        out = {"model": args.model, "args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
