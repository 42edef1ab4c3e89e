"""Mirostat 1 and 2: sampling that steers each token's surprise towards a target, as llama.cpp's samplers do.

Its state `mu` (the largest surprise allowed, in bits) follows every sampled token: mu -= eta * (surprise - tau),
surprise = -log2 p(token) in the truncated distribution. Mirostat 2 keeps the likeliest tokens whose surprise is at
most mu; mirostat 1 estimates the Zipf exponent of the top 100 tokens and keeps the top k that mu implies. As in
llama.cpp's chain, mirostat replaces the other samplers: only the logit bias and the temperature come before it.
"""

from __future__ import annotations

import math

import numpy as np

M = 100  # llama.cpp's m for mirostat 1: the tokens the Zipf exponent is estimated from


def initial_mu(tau: float) -> float:
    return 2.0 * tau


def distribution(z: np.ndarray, version: int, tau: float, mu: float) -> np.ndarray:
    """The truncated, renormalised distribution mirostat `version` draws from at state `mu`, over logits `z`
    already divided by the temperature."""
    p = np.exp(z - np.max(z))
    p /= p.sum()
    if version == 2:
        # The likeliest tokens up to the first whose surprise exceeds mu: all with p >= 2^-mu (at least the top).
        keep = p >= 2.0**-mu if mu < 1000 else p > 0
        if not keep.any():
            keep[int(np.argmax(p))] = True
    else:
        # Only the top M need sorting (a full sort of a 152k vocabulary costs ~12 ms a row).
        top = np.argpartition(-p, M)[:M] if p.shape[0] > M else np.arange(p.shape[0])
        top = top[np.argsort(-p[top], kind="stable")]
        k = _mirostat1_k(p[top], mu, p.shape[0])
        keep = np.zeros(p.shape[0], dtype=bool)
        keep[top[:k] if k <= top.shape[0] else np.argpartition(-p, k - 1)[:k]] = True
    out = np.where(keep, p, 0.0)
    return out / out.sum()


def _mirostat1_k(ps: np.ndarray, mu: float, n_vocab: int) -> int:
    """Mirostat 1's k (1 to n_vocab): from the Zipf exponent s estimated on the top M probabilities (`ps`, sorted
    descending)."""
    n = min(M - 1, ps.shape[0] - 1)
    i = np.arange(n, dtype=np.float64)
    t = np.log((i + 2.0) / (i + 1.0))
    b = np.log(np.maximum(ps[:n], 1e-300) / np.maximum(ps[1 : n + 1], 1e-300))
    s_hat = float((t * b).sum() / (t * t).sum())
    eps = s_hat - 1.0
    try:
        base = (eps * 2.0**mu) / (1.0 - n_vocab ** (-eps))
        # A base <= 0 (a flat or inverted top) has no real root: float32 powf gives NaN there and llama.cpp keeps 1.
        k = base ** (1.0 / s_hat) if base > 0 and s_hat != 0 else 1.0
    except (OverflowError, ZeroDivisionError):
        k = float(n_vocab)  # 2 ** mu past a double: mu so large nothing is cut
    if not math.isfinite(k):
        k = float(n_vocab) if k > 0 else 1.0
    return int(min(max(k, 1.0), n_vocab))


def next_mu(mu: float, p: np.ndarray, token: int, tau: float, eta: float) -> float:
    """The state after `token` was drawn from `p`: mu moves by eta times the surprise's error."""
    surprise = -math.log2(max(float(p[token]), 1e-300))
    return mu - eta * (surprise - tau)
