"""The Qwen2.5-Coder 1.5B target with its 0.5B draft on this machine's CPU, as the class benchmarks run it: a session,
one greedy request, and the pool's arms side by side on the held-out prompts."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lib.held_out import HELD_OUT


def pair_session(threads: int, n_ctx: int = 4096):
    """A session of the pair (Dynamic Draft off: each request names its setting)."""
    from app.engine.config import EngineConfig
    from app.engine.session import Session
    from app.models.packaged import ensure_model

    target, draft = ensure_model("qwen2.5-coder-1.5b"), ensure_model("qwen2.5-coder-0.5b")
    cfg = EngineConfig(
        model=str(target), draft=str(draft), n_ctx=n_ctx, n_batch=512, n_threads=threads, dynamic_draft=False
    )
    return Session(cfg)


def run_greedy(s: Any, user: str, spec: Any) -> Any:
    """One greedy request of 64 tokens with this user message and speculative setting; its summary."""
    from app.engine.types import DoneEvent, GenerationRequest
    from app.runtime.sampling import SamplingParams

    req = GenerationRequest(
        messages=({"role": "user", "content": user},),
        max_tokens=64,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
    )
    return [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary


def pool_side_by_side(s: Any, prompts: list[str], repeats: int, knob: str, arms: dict[str, Any]) -> list[str]:
    """The pool ("pool n16,p0,cost") on each held-out prompt with `pool.<knob>` set to each arm's value (an arm
    named "plain" runs plain decoding), interleaved in alternating order, the source memory frozen so every run
    starts alike; a markdown table of each arm's median tok/s, its runs and drafted/accepted counts."""
    from app.engine import memory
    from app.speculative import pool as pool_rules
    from app.speculative.settings import PLAIN, SpecSettings

    memory.remember = lambda *a, **k: None  # type: ignore[assignment]  # frozen: every run starts alike
    pool = SpecSettings("pool", 16, cost_stop=True)
    kept = getattr(pool_rules, knob)
    lines = ["| prompt | arm | median tok/s | runs | drafted/accepted |", "|---|---|---|---|---|"]
    for name in prompts:
        user = {n: u for n, _, u in HELD_OUT}[name]
        rows: dict[str, list[tuple[float, int, int]]] = {a: [] for a in arms}
        for r in range(repeats):
            for arm in list(arms) if r % 2 == 0 else list(arms)[::-1]:
                setattr(pool_rules, knob, arms[arm])
                t = run_greedy(s, user, PLAIN if arm == "plain" else pool).timings
                rows[arm].append((round(t.predicted_per_second, 2), t.draft_n, t.draft_n_accepted))
        for arm, rs in rows.items():
            med = statistics.median(x[0] for x in rs)
            runs = ", ".join(f"{x[0]:.1f}" for x in rs)
            da = ", ".join(f"{x[1]}/{x[2]}" for x in rs)
            lines.append(f"| {name} | {arm} | {med:.2f} | {runs} | {da} |")
        print("\n".join(lines[-len(arms) :]), flush=True)
    setattr(pool_rules, knob, kept)
    return lines
