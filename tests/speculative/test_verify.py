"""Verification maths on synthetic distributions: greedy matching and exact speculative sampling."""

from __future__ import annotations

import numpy as np
import pytest

from app.runtime.sampling import draw
from app.speculative.verify import Verdict, verify_greedy, verify_sampled


def test_greedy_accepts_matching_prefix_then_target_token() -> None:
    assert verify_greedy([5, 6, 9, 1], [5, 6, 7]) == Verdict(2, 9)
    assert verify_greedy([5, 6, 7, 1], [5, 6, 7]) == Verdict(3, 1)
    assert verify_greedy([4], []) == Verdict(0, 4)
    assert verify_greedy([3, 8], [2]) == Verdict(0, 3)


def _first_token_law(p: np.ndarray, q: np.ndarray | None, n: int, seed: int, verifier=verify_sampled) -> np.ndarray:
    """Empirical law of the first emitted token when a one-token draft (from q, or a fixed token) is verified."""
    rng = np.random.default_rng(seed)
    counts = np.zeros(p.shape[0])
    fixed = int(np.argmax(q)) if q is None else None
    p_next = np.full(p.shape[0], 1.0 / p.shape[0])
    for _ in range(n):
        if q is None:
            x, dist = 2, None  # a point-mass draft (prompt lookup) always proposing token 2
        else:
            x, dist = draw(q, rng), q
        v = verifier(lambda i: p if i == 0 else p_next, [x], [dist], rng)
        counts[x if v.n_accepted >= 1 else v.next_token] += 1
    del fixed
    return counts / n


P = np.array([0.05, 0.40, 0.30, 0.15, 0.10])
Q = np.array([0.30, 0.10, 0.30, 0.20, 0.10])
N = 40_000
# Total variation of an empirical law over 5 outcomes from 40k samples: its standard deviation is well under 0.005,
# so 0.012 leaves room for noise while a biased verifier (TV >= 0.1 below) cannot pass.
TV_BOUND = 0.012


@pytest.mark.parametrize("q", [Q, None], ids=["rejection-sampling", "point-mass"])
def test_sampled_verification_preserves_target_distribution(q: np.ndarray | None) -> None:
    law = _first_token_law(P, q, N, seed=1)
    assert 0.5 * np.abs(law - P).sum() < TV_BOUND


def _biased_verifier(target_dist, draft, dists, rng):
    """A broken verifier that always accepts the draft: its output follows q, not p."""
    return Verdict(len(draft), draw(target_dist(len(draft)), rng))


def test_a_biased_verifier_fails_the_same_check() -> None:
    law = _first_token_law(P, Q, N, seed=2, verifier=_biased_verifier)
    assert 0.5 * np.abs(law - P).sum() > 0.1


def test_full_acceptance_emits_a_bonus_token_from_the_next_row() -> None:
    rng = np.random.default_rng(0)
    p0 = np.array([0.0, 1.0, 0.0])
    p1 = np.array([0.0, 0.0, 1.0])
    v = verify_sampled(lambda i: [p0, p1][i], [1], [None], rng)
    assert v == Verdict(1, 2)
