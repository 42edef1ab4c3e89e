"""DynaDraft's decode loop vs llama.cpp's own C++ loop on the same models, settings and build flags.

Needs llama.cpp's `llama-bench` and `llama-speculative-simple` built from the llama.cpp source vendored in the pinned
llama-cpp-python sdist (same commit; see bench/README.md). Runs are interleaved (C++, Python, C++, …) so machine
noise hits both sides alike; prints medians and the DynaDraft ÷ llama.cpp ratio (goal ≥ 0.95). Asserts nothing.

Run: python bench/bench_vs_llamacpp.py --llama-bin /tmp/lcpp/bin [--small] [--n 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
from pathlib import Path

from app.engine.sampling import SamplingParams
from app.engine.session import EngineConfig, Session
from app.engine.types import DoneEvent, GenerationRequest
from app.models.packaged import speculative_pair
from app.speculative.settings import PLAIN, SpecSettings

PROMPT = 'def parse_csv_line(line):\n    """Split one CSV line into fields, honouring double quotes."""\n'


def cpp_plain(bin_dir: Path, model: Path, n: int, threads: int) -> float:
    out = subprocess.run(
        [
            str(bin_dir / "llama-bench"),
            "-m",
            str(model),
            "-p",
            "0",
            "-n",
            str(n),
            "-t",
            str(threads),
            "-r",
            "1",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(json.loads(out)[0]["avg_ts"])


def cpp_spec(bin_dir: Path, target: Path, draft: Path, n: int, n_max: int, threads: int) -> tuple[float, str]:
    proc = subprocess.run(
        [
            str(bin_dir / "llama-speculative-simple"),
            "-m",
            str(target),
            "-md",
            str(draft),
            "-p",
            PROMPT,
            "-n",
            str(n),
            "--temp",
            "0",
            "-t",
            str(threads),
            "-c",
            "1024",
            "--spec-type",
            "draft-simple",
            "--spec-draft-n-max",
            str(n_max),
            "--spec-draft-p-min",
            "0",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    text = proc.stdout + proc.stderr
    m = re.search(r"decoded\s+(\d+)\s+tokens in\s+([\d.]+)\s+seconds, speed:\s+([\d.]+)\s+t/s", text)
    if not m:
        raise RuntimeError("could not parse llama-speculative-simple output:\n" + text[-1500:])
    acc = re.search(r"accept\s*=\s*([\d.]+)%", text)
    return float(m.group(3)), (acc.group(1) + "%" if acc else "?")


def ours(s: Session, spec: SpecSettings, n: int) -> tuple[float, float]:
    req = GenerationRequest(prompt=PROMPT, max_tokens=n, sampling=SamplingParams(), speculative=spec)
    sm = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
    t = sm.timings
    return t.predicted_per_second, (t.draft_n_accepted / t.draft_n if t.draft_n else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--llama-bin", type=Path, required=True)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--n-max", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    target, draft = speculative_pair(args.small)
    s = Session(
        EngineConfig(str(target), str(draft), n_ctx=1024, n_batch=512, n_threads=args.threads, dynamic_draft=False)
    )
    spec = SpecSettings("draft", args.n_max, 0, 0.0)
    ours(s, PLAIN, 8)
    rows: dict[str, list[float]] = {"cpp plain": [], "dd plain": [], "cpp spec": [], "dd spec": []}
    acc = ("?", 0.0)
    for _ in range(args.repeats):
        rows["cpp plain"].append(cpp_plain(args.llama_bin, target, args.n, args.threads))
        rows["dd plain"].append(ours(s, PLAIN, args.n)[0])
        cs, ca = cpp_spec(args.llama_bin, target, draft, args.n, args.n_max, args.threads)
        rows["cpp spec"].append(cs)
        ds, da = ours(s, spec, args.n)
        rows["dd spec"].append(ds)
        acc = (ca, da)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(
        f"target {target.name}, draft {draft.name}, {args.n} tokens, greedy, {args.threads} threads, "
        f"median of {args.repeats} interleaved runs"
    )
    print(
        f"plain decoding:            llama.cpp {med['cpp plain']:6.2f} tok/s   DynaDraft {med['dd plain']:6.2f} tok/s"
        f"   ratio {med['dd plain'] / med['cpp plain']:.3f}"
    )
    print(
        f"speculative n_max={args.n_max}, p_min=0: llama.cpp {med['cpp spec']:6.2f} tok/s   DynaDraft "
        f"{med['dd spec']:6.2f} tok/s   ratio {med['dd spec'] / med['cpp spec']:.3f}"
        f"   (acceptance: llama.cpp {acc[0]}, DynaDraft {acc[1]:.0%})"
    )
    print(
        "note: llama-bench's tg test decodes without sampling; DynaDraft's plain figure includes its sampling and "
        "streaming, llama-speculative-simple's includes its own."
    )
    s.close()


if __name__ == "__main__":
    main()
