"""Loopback load check: many concurrent clients, mixed streaming, random disconnects; prints figures, asserts nothing.

Starts a real `dynadraft serve` on 127.0.0.1, learns each prompt's greedy answer alone, then lets `--clients` threads
send `--requests` requests in all (streaming or not, some dropping the connection on purpose). Every request must end
complete (its own prompt's exact answer: anything else would be another request's text) or as a clean 4xx/503;
/health is polled throughout, and the server's RSS is compared before and after.

    python -m bench.server.bench_load [--model PATH] [--clients 64] [--requests 2000] [--max-tokens 8] [--drop 0.2]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = [
    "Name three colours.",
    "What is 2 + 2?",
    "Say hello in French.",
    "List two fruits.",
    "Describe the sea in five words.",
    "Count from one to five.",
]


@dataclass
class LoadReport:
    """What happened to every request, /health, and the server's memory (RSS, bytes)."""

    outcomes: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    health_ok: int = 0
    health_failed: int = 0
    health_max_ms: float = 0.0
    rss_start: int = 0
    rss_peak: int = 0
    rss_end: int = 0
    wall_s: float = 0.0

    def summary(self) -> str:
        mb = 1024 * 1024
        return (
            f"requests: {dict(sorted(self.outcomes.items()))}; problems: {len(self.problems)}; "
            f"/health {self.health_ok} ok, {self.health_failed} failed, max {self.health_max_ms:.0f} ms; "
            f"RSS start {self.rss_start / mb:.1f} MB, peak {self.rss_peak / mb:.1f} MB, "
            f"end {self.rss_end / mb:.1f} MB; "
            f"wall {self.wall_s:.1f} s"
        )


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@contextmanager
def serve(model: str, max_queue: int = 8, threads: int = 1, ctx: int = 1024) -> Iterator[tuple[str, int]]:
    """A real `dynadraft serve` subprocess on a free loopback port: (base URL, pid)."""
    cmd = [sys.executable, "-m", "app", "serve", "--model", model, "--port", "0", "--threads", str(threads)]
    cmd += ["--max-queue", str(max_queue), "--ctx-size", str(ctx), "--model-id", "m"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/v1", line)
        if not match:
            raise RuntimeError(f"dynadraft serve did not start: {line!r}")
        yield match.group(1), proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def _body(prompt: str, max_tokens: int, stream: bool) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "cache_prompt": False,  # same prompt, same prefill split: greedy output cannot depend on what ran before
        "stream": stream,
    }


def expected_answers(url: str, max_tokens: int) -> dict[str, str]:
    out = {}
    for p in PROMPTS:
        r = httpx.post(f"{url}/v1/chat/completions", json=_body(p, max_tokens, False), timeout=300)
        r.raise_for_status()
        out[p] = r.json()["choices"][0]["message"]["content"]
    if len(set(out.values())) < 2:
        raise RuntimeError("the prompts' answers do not differ, so mixing could not show")
    return out


def _one(client: httpx.Client, prompt: str, max_tokens: int, stream: bool, drop: bool, expected: str) -> str:
    """One request; returns its outcome: complete, dropped (on purpose), refused_<status>, or bad:<why>."""
    body = _body(prompt, max_tokens, stream)
    if not stream:
        timeout = httpx.Timeout(300, read=0.05) if drop else httpx.Timeout(300)
        try:
            r = client.post("/v1/chat/completions", json=body, timeout=timeout)
        except httpx.ReadTimeout:
            return "dropped" if drop else "bad:read timeout"
        if r.status_code != 200:
            return _refusal(r.status_code, r.content)
        text = r.json()["choices"][0]["message"]["content"]
        return "complete" if text == expected else f"bad:text {text!r} != {expected!r}"
    with client.stream("POST", "/v1/chat/completions", json=body, timeout=300) as r:
        if r.status_code != 200:
            return _refusal(r.status_code, r.read())
        pieces, done = [], False
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            if drop:
                return "dropped"  # leaving the block closes the connection mid-stream
            if line == "data: [DONE]":
                done = True
                break
            chunk = json.loads(line[6:])
            if "error" in chunk:
                return f"bad:in-band error {chunk['error']}"
            pieces += [c["delta"].get("content") or "" for c in chunk["choices"]]
        text = "".join(pieces)
        if not done:
            return "bad:stream ended without [DONE]"
        return "complete" if text == expected else f"bad:text {text!r} != {expected!r}"


def _refusal(status: int, content: bytes) -> str:
    try:
        err = json.loads(content)["error"]
        clean = isinstance(err.get("message"), str) and err.get("type")
    except (ValueError, KeyError, TypeError, AttributeError):
        clean = False
    if (400 <= status < 500 or status == 503) and clean:
        return f"refused_{status}"
    return f"bad:status {status} {content[:200]!r}"


def run_load(
    url: str,
    pid: int,
    *,
    clients: int,
    requests: int,
    max_tokens: int,
    drop: float,
    seed: int = 0,
    expected: dict[str, str] | None = None,
) -> LoadReport:
    """Drive the server at `url` (process `pid`) and report; the caller decides what to assert."""
    report = LoadReport()
    expected = expected or expected_answers(url, max_tokens)
    report.rss_start = report.rss_peak = rss(pid)
    remaining = iter(range(requests))
    lock = threading.Lock()
    stop = threading.Event()

    def health() -> None:
        with httpx.Client(base_url=url, timeout=10) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                try:
                    ok = c.get("/health").status_code == 200
                except httpx.HTTPError:
                    ok = False
                ms = (time.perf_counter() - t0) * 1000.0
                with lock:
                    report.health_ok += ok
                    report.health_failed += not ok
                    report.health_max_ms = max(report.health_max_ms, ms)
                    report.rss_peak = max(report.rss_peak, rss(pid))
                stop.wait(0.05)

    def client(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        with httpx.Client(base_url=url) as c:
            while True:
                with lock:
                    n = next(remaining, None)
                if n is None:
                    return
                prompt = rng.choice(PROMPTS)
                try:
                    out = _one(c, prompt, max_tokens, rng.random() < 0.5, rng.random() < drop, expected[prompt])
                except (httpx.HTTPError, ValueError, KeyError) as e:
                    out = f"bad:{type(e).__name__}: {e}"
                with lock:
                    report.outcomes[out.split(":", 1)[0]] += 1
                    if out.startswith("bad"):
                        report.problems.append(out)
                if out == "refused_429":
                    time.sleep(rng.uniform(0.5, 1.5))  # a polite client backs off about Retry-After (1 s)

    t0 = time.perf_counter()
    poller = threading.Thread(target=health, daemon=True)
    poller.start()
    workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    report.wall_s = time.perf_counter() - t0
    # Wait for the engine to finish what dropped clients left (cancelled within a step), then settle.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and httpx.get(f"{url}/health", timeout=10).json()["queue_depth"] > 0:
        time.sleep(0.1)
    time.sleep(1.0)
    stop.set()
    poller.join(10)
    report.rss_end = rss(pid)
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="GGUF to serve (default: SmolLM2-135M)")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--drop", type=float, default=0.2, help="share of requests whose client disconnects early")
    ap.add_argument("--warmup", type=int, default=128, help="requests before the RSS baseline is taken")
    args = ap.parse_args()
    if args.model is None:
        from app.models.packaged import ensure_model

        args.model = str(ensure_model("smollm2-135m"))
    with serve(args.model) as (url, pid):
        print(f"server {url} pid {pid}; warm-up {args.warmup} requests…", flush=True)
        warm = run_load(
            url, pid, clients=args.clients, requests=args.warmup, max_tokens=args.max_tokens, drop=args.drop
        )
        print("warm-up:", warm.summary(), flush=True)
        rep = run_load(
            url, pid, clients=args.clients, requests=args.requests, max_tokens=args.max_tokens, drop=args.drop, seed=1
        )
        print("load:   ", rep.summary())
        for p in rep.problems[:10]:
            print("  problem:", p)
        grew = (rep.rss_end - rep.rss_start) / 1024 / 1024
        print(f"RSS end - start: {grew:+.1f} MB ({rep.rss_end / max(rep.rss_start, 1):.3f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
