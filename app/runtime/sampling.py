"""Sampling maths on raw logits: logit bias, penalties, top-k, top-p, min-p, temperature, greedy and seeded draws.

The order follows llama.cpp's default sampler chain (logit bias -> penalties -> top-k -> top-p -> min-p ->
temperature -> draw),
so users get the behaviour they know from llama.cpp. The full processed distribution is returned as an array
because exact speculative verification needs p(x) for any token, not just a sample.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# Exact top-p needs a sort of the vocabulary (~150k entries, several ms). Almost always the nucleus lives in the
# few hundred most likely tokens, so look there first and fall back to the full sort only when it does not.
_TOP_P_PREFILTER = 1024
# Below this a temperature only sharpens the distribution to its argmax (and z / 1e-40 overflows): decode greedily.
MIN_TEMPERATURE = 1e-4
# A repetition penalty scales logits by up to 1/penalty; below this it is no longer a penalty but an overflow.
MIN_REPEAT_PENALTY = 0.01


@dataclass(frozen=True)
class SamplingParams:
    """The sampling knobs of llama.cpp and the OpenAI API; a temperature below MIN_TEMPERATURE means greedy."""

    temperature: float = 0.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0
    min_p: float = 0.0
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repeat_last_n: int = 64
    seed: int | None = None
    # (token id, bias) pairs added to the logits before anything else, as llama.cpp's logit-bias sampler does; a
    # bias of -inf bans the token. Ids past a logits row (a draft model with a smaller vocabulary) are skipped.
    logit_bias: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        if not (0.0 <= self.temperature <= 100.0):
            raise ValueError("temperature must be in [0, 100]")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError("top_p must be in (0, 1]")
        if not (0.0 <= self.min_p <= 1.0):
            raise ValueError("min_p must be in [0, 1]")
        if not (MIN_REPEAT_PENALTY <= self.repeat_penalty <= 10.0):
            raise ValueError(f"repeat_penalty must be in [{MIN_REPEAT_PENALTY}, 10]")
        if not (-2.0 <= self.presence_penalty <= 2.0) or not (-2.0 <= self.frequency_penalty <= 2.0):
            raise ValueError("presence_penalty and frequency_penalty must be in [-2, 2]")
        if self.repeat_last_n < 0:
            raise ValueError("repeat_last_n must be >= 0")
        for token, bias in self.logit_bias:
            check_bias_entry(token, bias)

    @property
    def greedy(self) -> bool:
        return self.temperature < MIN_TEMPERATURE

    @property
    def has_penalties(self) -> bool:
        return self.repeat_penalty != 1.0 or self.presence_penalty != 0.0 or self.frequency_penalty != 0.0

    @property
    def adjusts_logits(self) -> bool:
        """Whether adjust_logits changes anything (a bias or a penalty), so plain argmax is not enough."""
        return bool(self.logit_bias) or self.has_penalties


def check_bias_entry(key: int | str, bias: float) -> None:
    """One logit_bias entry's own checks (a token id is 0 or more; a bias is finite or -inf); ValueError says which."""
    if isinstance(key, int) and key < 0:
        raise ValueError(f"logit_bias: token ids are 0 or more, got {key}")
    if math.isnan(bias) or bias == math.inf:
        raise ValueError(f"logit_bias: a bias is a finite number or -inf (a ban), got {bias} for {key!r}")


def with_bias(logits: np.ndarray, bias: tuple[tuple[int, float], ...]) -> np.ndarray:
    """`logits` (a new float64 array) with each (token, bias) added; ids past the row are skipped."""
    out = np.array(logits, dtype=np.float64, copy=True)
    for token, b in bias:
        if token < out.shape[0]:
            out[token] += b
    return out


def resolve_logit_bias(
    entries: Sequence[tuple[int | str, float]], tokenize: Callable[[str], list[int]], n_vocab: int
) -> tuple[tuple[int, float], ...]:
    """llama-server's logit_bias entries as (token id, bias) pairs: a text key biases every token of it (tokenized
    without special tokens, as llama-server does), and biases given twice for one token add up, as the sampler adds
    each. Raises ValueError naming a token outside the vocabulary, or a text without tokens."""
    total: dict[int, float] = {}
    for key, bias in entries:
        tokens = tokenize(key) if isinstance(key, str) else [key]
        if not tokens:
            raise ValueError(f"logit_bias: {key!r} has no tokens")
        for token in tokens:
            if not 0 <= token < n_vocab:
                raise ValueError(f"logit_bias: token {token} is not in the vocabulary (0..{n_vocab - 1})")
            total[token] = total.get(token, 0.0) + bias
    return tuple(total.items())


def adjust_logits(logits: np.ndarray, params: SamplingParams, history: Sequence[int]) -> np.ndarray:
    """The logit bias, then repetition, presence and frequency penalties over the last `repeat_last_n` tokens (a new
    float64 array).

    float64: a float32 logit near its maximum divided by a small penalty would overflow to inf (then NaN).
    """
    out = with_bias(logits, params.logit_bias)
    if not params.has_penalties or params.repeat_last_n == 0 or not history:
        return out
    window = history[-params.repeat_last_n :]
    counts = Counter(t for t in window if 0 <= t < out.shape[0])
    if not counts:
        return out
    ids = np.fromiter(counts.keys(), dtype=np.int64)
    cnt = np.fromiter(counts.values(), dtype=np.float64)
    vals: np.ndarray = out[ids]
    if params.repeat_penalty != 1.0:
        vals = np.where(vals > 0, vals / params.repeat_penalty, vals * params.repeat_penalty)
    vals = vals - cnt * params.frequency_penalty - params.presence_penalty
    out[ids] = vals
    return out


def greedy_token(logits: np.ndarray, params: SamplingParams | None = None, history: Sequence[int] = ()) -> int:
    if params is not None and params.adjusts_logits:
        logits = adjust_logits(logits, params, history)
    return int(np.argmax(logits))


def _softmax(x: np.ndarray) -> np.ndarray:
    m = np.max(x)
    e = np.exp((x - m).astype(np.float64))
    return e / e.sum()


def distribution(logits: np.ndarray, params: SamplingParams, history: Sequence[int] = ()) -> np.ndarray:
    """The exact probability vector (float64, sums to 1) that a draw with `params` samples from.

    Greedy parameters give a one-hot vector at the argmax.
    """
    z = adjust_logits(logits, params, history)
    n = z.shape[0]
    if params.greedy:
        p = np.zeros(n, dtype=np.float64)
        p[int(np.argmax(z))] = 1.0
        return p
    keep = np.ones(n, dtype=bool)
    if 0 < params.top_k < n:
        kth = np.argpartition(-z, params.top_k - 1)[: params.top_k]
        keep[:] = False
        keep[kth] = True
    if params.top_p < 1.0:
        keep &= _top_p_mask(z, keep, params.top_p)
    if params.min_p > 0.0:
        zm = np.where(keep, z, -np.inf)
        keep &= zm >= (np.max(zm) + np.log(params.min_p))
    # Log-space: shift so the best kept logit is 0 before dividing, so a small temperature gives large negative
    # values (exp -> 0) rather than inf - inf = NaN.
    zk = np.where(keep, z, -np.inf)
    return _softmax((zk - np.max(zk)) / params.temperature)


def _top_p_mask(z: np.ndarray, keep: np.ndarray, top_p: float) -> np.ndarray:
    """The smallest set of most likely tokens (among `keep`) whose T=1 probability mass reaches top_p."""
    zk = np.where(keep, z, -np.inf)
    p = _softmax(zk)
    n = p.shape[0]
    cand = np.argpartition(-p, _TOP_P_PREFILTER)[:_TOP_P_PREFILTER] if n > _TOP_P_PREFILTER else np.arange(n)
    if p[cand].sum() < top_p:
        cand = np.arange(n)
    order = cand[np.argsort(-p[cand], kind="stable")]
    csum = np.cumsum(p[order])
    last = int(np.searchsorted(csum, top_p)) + 1  # include the token that crosses the threshold
    mask = np.zeros(n, dtype=bool)
    mask[order[: min(last, order.shape[0])]] = True
    return mask


def draw(p: np.ndarray, rng: np.random.Generator) -> int:
    """One draw from probability vector `p` (need not be exactly normalised)."""
    c = np.cumsum(p)
    u = rng.random() * c[-1]
    return int(min(np.searchsorted(c, u, side="right"), p.shape[0] - 1))
