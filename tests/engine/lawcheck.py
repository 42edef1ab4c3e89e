"""The sampling-law check: the law of the first emitted token through the verifier, against the target's own p."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.runtime.sampling import draw
from app.speculative.verify import verify_sampled


def first_token_tv(p: np.ndarray, q: np.ndarray, n: int, seed: int, accept_all: bool = False) -> float:
    """Total variation between p and the empirical law of the token emitted after a one-token draft from q.

    accept_all: a broken verifier that keeps every draft (its output follows q), to show the check can fail.
    q may cover more or fewer ids than p (a draft with another vocabulary size)."""
    rng = np.random.default_rng(seed)
    counts = np.zeros(max(p.shape[0], q.shape[0]))
    for _ in range(n):
        x = draw(q, rng)
        if accept_all:
            counts[x] += 1
            continue
        v = verify_sampled(lambda i: p, [x], [q], rng)
        counts[x if v.n_accepted else v.next_token] += 1
    target = np.zeros_like(counts)
    target[: p.shape[0]] = p
    return float(0.5 * np.abs(counts / n - target).sum())


def next_token_logits(session: Any, prompt: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(target logits, draft logits) after `prompt`, each model prefilled from scratch (copies: the rows move)."""
    out = []
    for ctx in (session.ctx, session.sources["draft"].ctx):
        ctx.clear()
        ctx.prefill(prompt)
        out.append(np.array(ctx.logits(-1), copy=True))
    return out[0], out[1]
