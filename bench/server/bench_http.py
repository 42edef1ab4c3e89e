"""Streaming over HTTP vs the engine directly: tok/s ratio and time-to-first-token overhead; prints, asserts nothing.

The engine and the endpoint share one process (as in the app); the HTTP client runs in a separate process (as a
real client would), so its JSON parsing does not compete with the engine for the GIL. Runs alternate direct/HTTP.

    python -m bench.server.bench_http [--model PATH] [--rounds 5] [--max-tokens 256] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROMPT = "1, 2, 3, 4, 5, 6, 7, 8,"  # counting: a long, deterministic greedy continuation (no early EOS)


def _result(t0: float, times: list[float], n_tokens: int, t_end: float) -> dict[str, float]:
    first, last = times[0], times[-1]
    return {
        "ttft_ms": (first - t0) * 1000.0,
        "decode_tps": (n_tokens - 1) / (last - first) if last > first else 0.0,
        "e2e_tps": n_tokens / (t_end - t0),
        "tokens": n_tokens,
    }


def stream_once(client: Any, body: dict[str, Any]) -> dict[str, float]:
    """One streaming completion over HTTP, timed on the client side as each text chunk arrives."""
    times: list[float] = []
    n_tokens = 0
    server_tps = 0.0
    t0 = time.perf_counter()
    with client.stream("POST", "/v1/completions", json=body) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk["choices"] and chunk["choices"][0]["text"]:
                times.append(time.perf_counter())
            if chunk.get("usage"):
                n_tokens = chunk["usage"]["completion_tokens"]
                server_tps = chunk["timings"]["predicted_per_second"]
    out = _result(t0, times, n_tokens, time.perf_counter())
    out["server_tps"] = server_tps
    out["chunks"] = len(times)
    return out


def _body(model: str, max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def run_client(url: str, model: str, max_tokens: int) -> None:
    """Client mode (a subprocess): one streaming completion per line on stdin, one JSON result per line out."""
    import httpx

    with httpx.Client(base_url=url, timeout=300) as client:
        for _ in sys.stdin:
            print(json.dumps(stream_once(client, _body(model, max_tokens))), flush=True)


def run_direct(engine: Any, max_tokens: int) -> dict[str, float]:
    from app.engine.types import DoneEvent, GenerationRequest, TextEvent
    from app.runtime.sampling import SamplingParams

    request = GenerationRequest(prompt=PROMPT, max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0))
    times: list[float] = []
    n_tokens = 0
    engine_tps = 0.0
    t0 = time.perf_counter()
    for ev in engine.submit(request).events():
        if isinstance(ev, TextEvent) and ev.text:
            times.append(time.perf_counter())
        elif isinstance(ev, DoneEvent):
            n_tokens = ev.summary.timings.predicted_n
            engine_tps = ev.summary.timings.predicted_per_second
    out = _result(t0, times, n_tokens, time.perf_counter())
    out["server_tps"] = engine_tps  # the engine's own predicted_per_second, as the HTTP rows report it
    out["chunks"] = len(times)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--model", help="GGUF (default: the packaged SmolLM2-135M)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--ctx-size", type=int, default=2048)
    p.add_argument("--threads", type=int, default=0, help="engine threads (0: all cores)")
    p.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)
    p.add_argument("--model-id", default="bench", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.client:
        run_client(args.client, args.model_id, args.max_tokens)
        return 0

    import httpx

    from app.engine.config import EngineConfig
    from app.engine.worker import Engine
    from app.server.runner import EndpointServer

    if args.model is None:
        from app.models.packaged import ensure_model

        args.model = str(ensure_model("smollm2-135m"))
    engine = Engine(EngineConfig(model=args.model, n_ctx=args.ctx_size, n_threads=args.threads)).wait_ready()
    server = EndpointServer(engine, args.model_id, port=0)
    server.start()
    client = subprocess.Popen(
        [sys.executable, __file__, "--client", server.url, "--model-id", args.model_id,
         "--max-tokens", str(args.max_tokens)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert client.stdin is not None and client.stdout is not None

    def http_round() -> dict[str, float]:
        assert client.stdin is not None and client.stdout is not None
        client.stdin.write("go\n")
        client.stdin.flush()
        return json.loads(client.stdout.readline())  # type: ignore[no-any-return]

    local = httpx.Client(base_url=server.url, timeout=300)  # a client in this process (shares the GIL and the CPU)
    body = _body(args.model_id, args.max_tokens)
    steps: dict[str, Callable[[], dict[str, float]]] = {
        "direct": lambda: run_direct(engine, args.max_tokens),
        "http (client process)": http_round,
        "http (client in-process)": lambda: stream_once(local, body),
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in steps}
    try:
        for step in steps.values():  # warm-up: prefix cache, page cache, connections
            step()
        names = list(steps)
        for i in range(args.rounds):
            for name in names[i % 3 :] + names[: i % 3]:  # rotate the order so drift hits every mode alike
                runs[name].append(steps[name]())
    finally:
        local.close()
        client.stdin.close()
        client.wait(30)
        server.stop()
        engine.close()

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    direct = runs["direct"]
    model = Path(args.model).name
    print(f"model {model}, {args.max_tokens} tokens, threads {args.threads}, {args.rounds} rounds each (medians)")
    print(f"{'':24} {'TTFT ms':>9} {'decode tok/s':>13} {'e2e tok/s':>10} {'engine tok/s':>13} {'chunks':>7}")
    for name, rows in runs.items():
        ttft, decode, e2e = (med(rows, k) for k in ("ttft_ms", "decode_tps", "e2e_tps"))
        server_tps, chunks = med(rows, "server_tps"), med(rows, "chunks")
        print(f"{name:24} {ttft:9.2f} {decode:13.1f} {e2e:10.1f} {server_tps:13.1f} {chunks:7.0f}")
    for name in list(runs)[1:]:
        rows = runs[name]
        print(
            f"{name}: decode tok/s ratio {med(rows, 'decode_tps') / med(direct, 'decode_tps'):.3f} (goal >= 0.97), "
            f"e2e ratio {med(rows, 'e2e_tps') / med(direct, 'e2e_tps'):.3f}, "
            f"TTFT overhead {med(rows, 'ttft_ms') - med(direct, 'ttft_ms'):+.2f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
