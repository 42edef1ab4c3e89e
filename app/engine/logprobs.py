"""Log-probabilities of generated tokens from the target's own logits rows (what OpenAI's `logprobs` reports)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.engine.types import TokenLogprob


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log p over the vocabulary for one raw logits row (float64, so tiny probabilities keep their sign <= 0)."""
    z = logits.astype(np.float64)
    m = float(np.max(z))
    return np.asarray(z - (m + np.log(np.exp(z - m).sum())))


def token_logprob(logits: np.ndarray, token: int, k: int, piece: Callable[[int], bytes]) -> TokenLogprob:
    """The chosen token's log-probability under the model and the k most likely tokens of the same row."""
    lp = log_softmax(logits)
    top: tuple[tuple[int, bytes, float], ...] = ()
    if k > 0:
        n = lp.shape[0]
        ids = np.argpartition(-lp, k)[:k] if k < n else np.arange(n)
        ids = ids[np.lexsort((ids, -lp[ids]))]
        top = tuple((int(i), piece(int(i)), min(0.0, float(lp[i]))) for i in ids)
    return TokenLogprob(token, piece(token), min(0.0, float(lp[token])), top)
