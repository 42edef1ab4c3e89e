"""Conversation-cache benchmark: second-turn and chat-switch time to first token against a cold prefill, in one run.

Run: python -m bench.context.bench_cache [--models tiny-hybrid,smollm2,qwen1.5b] [--history 4096] [--switch 2048]
     [--threads N] [--cache-ram MiB]
Prints, per model: P7 = second-turn TTFT / first-turn TTFT on a shared history of ~--history tokens (goal <= 0.10),
switch = TTFT after switching between two ~--switch-token chats / their cold TTFT (goal <= 0.15), and the bytes held
per cached token beside the budget. TTFT here is the engine's: template + tokenize + cache restore + prefill + first
sample (a request's wall time minus its generation time). Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN
from bench.lib.small_models import WORDS, model_path


def history(session: Session, n_tokens: int, seed: int) -> list[dict[str, str]]:
    """Alternating user/assistant messages of plain words, grown until the rendered chat holds ~n_tokens."""
    rng = random.Random(seed)
    msgs: list[dict[str, str]] = []
    while True:
        role = "user" if len(msgs) % 2 == 0 else "assistant"
        msgs.append({"role": role, "content": " ".join(rng.choice(WORDS) for _ in range(40))})
        if role == "assistant" and len(session.format_prompt(_req(msgs))) >= n_tokens:
            return msgs


def _req(msgs: list[dict[str, str]], max_tokens: int = 8) -> GenerationRequest:
    return GenerationRequest(
        messages=tuple(msgs), max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0), speculative=PLAIN
    )


def turn(session: Session, msgs: list[dict[str, str]]) -> tuple[float, GenerationSummary]:
    """(TTFT in ms, summary) of one request."""
    t0 = time.perf_counter()
    done = [ev for ev in session.generate(_req(msgs)) if isinstance(ev, DoneEvent)][0].summary
    wall_ms = (time.perf_counter() - t0) * 1000.0
    return wall_ms - done.timings.predicted_ms, done


def follow_up(msgs: list[dict[str, str]], reply: GenerationSummary, question: str) -> list[dict[str, str]]:
    return [*msgs, {"role": "assistant", "content": reply.text}, {"role": "user", "content": question}]


def bench_model(name: str, args: argparse.Namespace) -> None:
    path = model_path(name)
    n_ctx = max(args.history, args.switch) + 1024
    cfg = EngineConfig(model=str(path), n_ctx=n_ctx, n_batch=512, n_threads=args.threads, cache_ram_mib=args.cache_ram)
    session = Session(cfg)
    try:
        kind = "hybrid/recurrent" if session.model.is_recurrent else "attention"
        # P7: the same conversation, next turn.
        chat = [*history(session, args.history, 1), {"role": "user", "content": "yes or no?"}]
        t1, s1 = turn(session, chat)
        t2, s2 = turn(session, follow_up(chat, s1, "and then?"))
        print(
            f"{name} ({kind}): P7 second/first turn TTFT = {t2:.0f} / {t1:.0f} ms = {t2 / t1:.3f} "
            f"(prompt {s1.prompt_tokens} -> {s2.prompt_tokens} tokens, cached {s2.timings.cache_n})"
        )
        # Switching between two chats (another client, or another chat in the app).
        a = [*history(session, args.switch, 2), {"role": "user", "content": "left or right?"}]
        b = [*history(session, args.switch, 3), {"role": "user", "content": "up or down?"}]
        cold_a, sa = turn(session, a)
        cold_b, sb = turn(session, b)
        warm_a, sa2 = turn(session, follow_up(a, sa, "why?"))
        warm_b, sb2 = turn(session, follow_up(b, sb, "why?"))
        cold, warm = statistics.mean([cold_a, cold_b]), statistics.mean([warm_a, warm_b])
        print(
            f"{name} ({kind}): switch TTFT after switching / cold = {warm:.0f} / {cold:.0f} ms = {warm / cold:.3f} "
            f"(prompts {sa.prompt_tokens}/{sb.prompt_tokens} tokens, "
            f"cached {sa2.timings.cache_n}/{sb2.timings.cache_n})"
        )
        snap = session.cache.snapshot()
        target = [e for e in session.cache.store.entries if e.owner == "target"]
        biggest = max(target, key=lambda e: len(e.tokens), default=None)
        per_token = biggest.nbytes / len(biggest.tokens) if biggest else 0.0
        print(
            f"{name} ({kind}): held {snap['bytes'] / 2**20:.1f} MiB in {snap['entries']} states, "
            f"{per_token / 1024:.1f} KiB per cached token (largest state: {len(biggest.tokens) if biggest else 0} "
            f"tokens), budget {snap['budget'] / 2**20:.0f} MiB; hits {snap['hits']} misses {snap['misses']} "
            f"restores {snap['restores']} evictions {snap['evictions']}"
        )
    finally:
        session.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny-hybrid,smollm2,qwen1.5b")
    ap.add_argument("--history", type=int, default=4096, metavar="N", help="shared history for P7, in tokens")
    ap.add_argument("--switch", type=int, default=2048, metavar="N", help="each chat's length for the switch")
    ap.add_argument("--threads", type=int, default=0, metavar="N")
    ap.add_argument("--cache-ram", type=int, default=-1, metavar="MiB")
    args = ap.parse_args()
    print(f"load: {os.getloadavg()}")
    for name in args.models.split(","):
        bench_model(name.strip(), args)
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
