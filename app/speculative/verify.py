"""Verification of a draft against the target: greedy matching and exact speculative (rejection) sampling.

Greedy: accept while the target's argmax equals the drafted token, then emit the target's own next token.
Sampling: for each drafted token x with draft probability q(x) accept with probability min(1, p(x)/q(x)); on the first
rejection draw from the normalised residual max(p - q, 0). When the source gives no distribution (prompt lookup, or a
greedy draft model), q is a point mass at x: accept with probability p(x), else draw from p with x removed — the same
law as "sample from p and keep the draft only if it matches". Either way the emitted tokens follow the target's
distribution exactly (Leviathan et al. 2023; Chen et al. 2023).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.runtime.sampling import draw


@dataclass(frozen=True)
class Verdict:
    """How many drafted tokens were accepted, and the token the target emits after them."""

    n_accepted: int
    next_token: int


def verify_greedy(target_tokens: Sequence[int], draft: Sequence[int]) -> Verdict:
    """`target_tokens[i]` is the target's greedy choice after `draft[:i]` (len(draft) + 1 entries)."""
    n = 0
    while n < len(draft) and draft[n] == target_tokens[n]:
        n += 1
    return Verdict(n, int(target_tokens[n]))


def verify_sampled(
    target_dist: Callable[[int], np.ndarray],
    draft: Sequence[int],
    draft_dists: Sequence[np.ndarray | None],
    rng: np.random.Generator,
) -> Verdict:
    """Exact speculative sampling. `target_dist(i)` is p after draft[:i]; it is called lazily, once per row used.

    `draft_dists[i]` is the full q the i-th token was drawn from, or None for a point mass at draft[i]. A q over a
    vocabulary of another size is aligned to p's ids (a drafted id the target lacks has p = 0: always rejected).
    """
    for i, x in enumerate(draft):
        p = target_dist(i)
        q = draft_dists[i] if i < len(draft_dists) else None
        if q is not None and q.shape[0] != p.shape[0]:
            q = _aligned(q, p.shape[0])
        px = float(p[x]) if 0 <= x < p.shape[0] else 0.0
        qx = float(q[x]) if q is not None and 0 <= x < q.shape[0] else 0.0
        accept = px if q is None else min(1.0, px / max(qx, 1e-300))
        if rng.random() < accept:
            continue
        if q is None:
            residual = p.copy()
            if 0 <= x < p.shape[0]:
                residual[x] = 0.0
        else:
            residual = np.maximum(p - q, 0.0)
        if residual.sum() <= 0.0:  # p == q exactly: any rejection is measure-zero; fall back to p itself
            residual = p
        return Verdict(i, draw(residual, rng))
    return Verdict(len(draft), draw(target_dist(len(draft)), rng))


def _aligned(q: np.ndarray, n: int) -> np.ndarray:
    """q indexed by the target's n ids: cut where the draft has more, zero-padded where it has fewer."""
    if q.shape[0] >= n:
        return q[:n]
    out = np.zeros(n, dtype=q.dtype)
    out[: q.shape[0]] = q
    return out
