"""Sampling maths on raw logits: logit bias, penalties, DRY, top-n-sigma, top-k, typical, top-p, min-p, XTC,
temperature (fixed or dynamic), greedy and seeded draws.

The order follows llama.cpp's default sampler chain (logit bias -> penalties -> DRY -> top-n-sigma -> top-k ->
typical -> top-p -> min-p -> XTC -> temperature -> draw), so users get the behaviour they know from llama.cpp. The
full processed distribution is returned as an array because exact speculative verification needs p(x) for any
token, not just a sample. At temperature 0 (greedy) only what changes logits applies (bias, penalties, DRY): the
argmax survives every truncation but typical's and XTC's, and greedy here means the argmax, deterministic.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from app.runtime import dry, mirostat

# Exact top-p needs a sort of the vocabulary (~150k entries, several ms). Almost always the nucleus lives in the
# few hundred most likely tokens, so a row longer than this looks there first (those within a logit gap of the top)
# and falls back to the full sort only when they do not hold the mass.
_TOP_P_PREFILTER = 1024
_TOP_K_GAPS = (4.0, 8.0, 16.0, 32.0)  # logit gaps below the maximum to look for the top k (or top-p's set) in
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
    # llama.cpp's further samplers, each off at its default (the values llama-server's fields take).
    typical_p: float = 1.0  # locally typical sampling; 1: off
    top_n_sigma: float = -1.0  # keep logits within n standard deviations of the top one; <= 0: off
    xtc_probability: float = 0.0  # "exclude top choices": how often the tokens above the threshold but the last go
    xtc_threshold: float = 0.1  # > 0.5: off
    dynatemp_range: float = 0.0  # temperature in [T - range, T + range] by the candidates' entropy; 0: off
    dynatemp_exponent: float = 1.0
    dry_multiplier: float = 0.0  # DRY repetition penalty (app.runtime.dry); 0: off
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = 64  # -1: the whole history
    dry_breakers: dry.Breakers | None = None  # resolved against the vocabulary by the engine
    # Mirostat 1 or 2 (app.runtime.mirostat): replaces every sampler after the logit bias, as in llama.cpp's chain.
    mirostat: int = 0
    mirostat_tau: float = 5.0  # the target surprise, in bits
    mirostat_eta: float = 0.1  # how fast mu follows
    mirostat_mu: float | None = None  # its state at this token, the engine's to carry (None: the start, 2 * tau)
    # The fewest candidates top-p, min-p, typical and XTC may leave (llama.cpp's min_keep; 0 and 1 keep one).
    min_keep: int = 0

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
        _check_range("typical_p", self.typical_p, 0.0, 1.0)
        _check_range("top_n_sigma", self.top_n_sigma, -math.inf, math.inf)
        _check_range("xtc_probability", self.xtc_probability, 0.0, 1.0)
        _check_range("xtc_threshold", self.xtc_threshold, 0.0, 1.0)
        _check_range("dynatemp_range", self.dynatemp_range, 0.0, 100.0)
        _check_range("dynatemp_exponent", self.dynatemp_exponent, 0.0, 100.0)
        _check_range("dry_multiplier", self.dry_multiplier, 0.0, 100.0)
        _check_range("dry_base", self.dry_base, 1.0, 100.0)
        _check_range("dry_allowed_length", self.dry_allowed_length, 0, 1 << 20)
        _check_range("dry_penalty_last_n", self.dry_penalty_last_n, -1, 1 << 24)
        if self.mirostat not in (0, 1, 2):
            raise ValueError(f"mirostat must be 0 (off), 1 or 2; got {self.mirostat!r}")
        _check_range("mirostat_tau", self.mirostat_tau, 0.0, 100.0)
        _check_range("mirostat_eta", self.mirostat_eta, 0.0, 10.0)
        _check_range("min_keep", self.min_keep, 0, 1 << 24)

    @property
    def greedy(self) -> bool:
        # A dynamic temperature around 0 still samples (in [0, range]), as llama.cpp's temp_ext does; mirostat's chain
        # has the plain temperature sampler instead.
        return self.temperature < MIN_TEMPERATURE and (self.dynatemp_range <= 0.0 or self.mirostat != 0)

    @property
    def dry_on(self) -> bool:
        return self.dry_multiplier > 0.0 and self.dry_penalty_last_n != 0

    @property
    def has_penalties(self) -> bool:
        return self.repeat_penalty != 1.0 or self.presence_penalty != 0.0 or self.frequency_penalty != 0.0

    @property
    def adjusts_logits(self) -> bool:
        """Whether adjust_logits changes anything (a bias or a penalty), so plain argmax is not enough."""
        return bool(self.logit_bias) or (not self.mirostat and (self.has_penalties or self.dry_on))

    def for_draft(self) -> SamplingParams:
        """What a model draft samples with: these knobs, the history's penalties and DRY included (the draft scores
        its own proposals with the history so far), but not mirostat, whose state follows the target's draws.

        A draft's q may be anything for exact verification; the closer to the target's p, the more is accepted: a
        draft without the penalties proposed, greedy, the very repeats a penalised target had just turned down."""
        if self.mirostat:  # its chain has no penalty either: the draft samples at the plain temperature
            return replace(
                self,
                mirostat=0,
                mirostat_mu=None,
                repeat_penalty=1.0,
                presence_penalty=0.0,
                frequency_penalty=0.0,
                dry_multiplier=0.0,
            )
        return self


def _check_range(name: str, value: float, low: float, high: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and low <= value <= high):
        lo = "" if low == -math.inf else f"{low} <= "
        hi = "" if high == math.inf else f" <= {high}"
        raise ValueError(f"{name} must be a finite number{', ' if lo or hi else ''}{lo}{name}{hi}; got {value!r}")


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
    """The logit bias, then repetition, presence and frequency penalties over the last `repeat_last_n` tokens, then
    DRY's (a new float64 array).

    float64: a float32 logit near its maximum divided by a small penalty would overflow to inf (then NaN).
    """
    out = with_bias(logits, params.logit_bias)
    if params.mirostat:
        return out  # llama.cpp's mirostat chain: the bias, the temperature, mirostat; no penalty
    if params.has_penalties and params.repeat_last_n > 0 and history:
        _penalise(out, params, history[-params.repeat_last_n :])
    if params.dry_on and history:
        for token, penalty in dry.penalties(
            history,
            params.dry_multiplier,
            params.dry_base,
            params.dry_allowed_length,
            params.dry_penalty_last_n,
            params.dry_breakers,
        ).items():
            if token < out.shape[0]:
                out[token] -= penalty
    return out


def _penalise(out: np.ndarray, params: SamplingParams, window: Sequence[int]) -> None:
    counts = Counter(t for t in window if 0 <= t < out.shape[0])
    if not counts:
        return
    ids = np.fromiter(counts.keys(), dtype=np.int64)
    cnt = np.fromiter(counts.values(), dtype=np.float64)
    vals: np.ndarray = out[ids]
    if params.repeat_penalty != 1.0:
        vals = np.where(vals > 0, vals / params.repeat_penalty, vals * params.repeat_penalty)
    vals = vals - cnt * params.frequency_penalty - params.presence_penalty
    out[ids] = vals


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

    Greedy parameters give a one-hot vector at the argmax. XTC drops its top tokens on a coin flip per draw, so its
    distribution is the mixture of the two outcomes, weighted by xtc_probability. Mirostat's depends on its state
    params.mirostat_mu, which the caller moves on after each draw (mirostat.next_mu).
    """
    z = adjust_logits(logits, params, history)
    n = z.shape[0]
    if params.greedy:
        return _one_hot(n, int(np.argmax(z)))
    if params.mirostat:
        mu = mirostat.initial_mu(params.mirostat_tau) if params.mirostat_mu is None else params.mirostat_mu
        return mirostat.distribution(z / params.temperature, params.mirostat, params.mirostat_tau, mu)
    # The candidates (indices into z; None: all of them) narrowed by each sampler in turn: after top-k every step
    # works on k values rather than the vocabulary (a 152k-entry row cost ~9 ms in numpy with llama.cpp's defaults).
    ids: np.ndarray | None = None
    zc = z
    keep = max(params.min_keep, 1)
    steps: list[tuple[bool, Callable[[np.ndarray], np.ndarray]]] = [
        (params.top_n_sigma > 0.0, lambda v: _top_n_sigma(v, params.top_n_sigma)),
        (0 < params.top_k < n, lambda v: _top_k(v, params.top_k)),
        (params.typical_p < 1.0, lambda v: _typical(v, params.typical_p, keep)),
        (params.top_p < 1.0, lambda v: _top_p(v, params.top_p, keep)),
        (params.min_p > 0.0, lambda v: _min_p(v, params.min_p, keep)),
    ]
    for on, narrow in steps:
        if on:
            sel = narrow(zc)
            ids, zc = (sel if ids is None else ids[sel]), zc[sel]
    pc = _with_temperature(zc, params)
    if params.xtc_probability > 0.0 and params.xtc_threshold <= 0.5:
        left = _xtc(zc, params.xtc_threshold, keep)
        if left is not None:
            fired = np.zeros_like(pc)
            fired[left] = _with_temperature(zc[left], params)
            pc = (1.0 - params.xtc_probability) * pc + params.xtc_probability * fired
    if ids is None:
        return pc
    p = np.zeros(n, dtype=np.float64)
    p[ids] = pc
    return p


def _top_n_sigma(zc: np.ndarray, n_sigma: float) -> np.ndarray:
    """The candidates within n_sigma standard deviations (of the finite logits) of the top one."""
    finite = np.isfinite(zc)
    if finite.sum() <= 1:
        return np.arange(zc.shape[0])
    return np.flatnonzero(zc >= np.max(zc) - n_sigma * float(np.std(zc[finite])))


def _top_k(zc: np.ndarray, k: int) -> np.ndarray:
    """The k candidates with the largest logits (indices into zc): a partial sort of those near the top (~0.1 ms to
    find on 152k entries) rather than of all (~2 ms)."""
    near = _near_top(zc, lambda ids: ids.shape[0] >= k)
    if near is None:
        near = np.arange(zc.shape[0])
    if near.shape[0] > k:
        near = near[np.argpartition(-zc[near], k - 1)[:k]]
    return near


def _near_top(zc: np.ndarray, enough: Callable[[np.ndarray], bool]) -> np.ndarray | None:
    """The candidates within the first of _TOP_K_GAPS of the top logit for which `enough` holds, or None: what
    top-k and top-p look for before sorting, a linear scan where most of a vocabulary lies far below the top."""
    top = float(np.max(zc))
    for gap in _TOP_K_GAPS:
        near = np.flatnonzero(zc >= top - gap)
        if enough(near):
            return near
    return None


def _one_hot(n: int, token: int) -> np.ndarray:
    p = np.zeros(n, dtype=np.float64)
    p[token] = 1.0
    return p


def _with_temperature(zc: np.ndarray, params: SamplingParams) -> np.ndarray:
    """softmax(zc / T) over the candidates' logits; with dynatemp_range, T follows their normalised entropy
    (llama.cpp's temp_ext: T - range at entropy 0 up to T + range at the uniform distribution's)."""
    temperature = params.temperature
    n_kept = zc.shape[0]
    if params.dynatemp_range > 0.0 and n_kept > 1:
        low = max(0.0, temperature - params.dynatemp_range)
        high = temperature + params.dynatemp_range
        p1 = _softmax(zc)
        nz = p1[p1 > 0]
        entropy = float(-(nz * np.log(nz)).sum())
        temperature = low + (high - low) * (entropy / math.log(n_kept)) ** params.dynatemp_exponent
    if temperature < MIN_TEMPERATURE:
        return _one_hot(n_kept, int(np.argmax(zc)))
    # Log-space: shift so the best logit is 0 before dividing, so a small temperature gives large negative values
    # (exp -> 0) rather than inf - inf = NaN.
    return _softmax((zc - np.max(zc)) / temperature)


def _typical(zc: np.ndarray, typical_p: float, keep: int = 1) -> np.ndarray:
    """Locally typical sampling: the candidates whose surprise -log p is nearest the entropy, until their mass
    passes typical_p (the one that passes it included) and at least `keep` are in, as indices into zc."""
    p = _softmax(zc)
    logp = np.log(np.maximum(p, 1e-300))
    entropy = float(-(p * logp).sum())
    order = np.argsort(np.abs(-logp - entropy), kind="stable")
    csum = np.cumsum(p[order])
    last = max(int(np.searchsorted(csum, typical_p, side="right")) + 1, keep)
    return order[: min(last, order.shape[0])]


def _xtc(zc: np.ndarray, threshold: float, keep: int = 1) -> np.ndarray | None:
    """XTC's candidates when its coin removes (indices into zc): all but those at or above `threshold` probability,
    the least likely of them kept; None where fewer than two reach it, or fewer than `keep` would be left (XTC then
    changes nothing)."""
    if zc.shape[0] < 2:
        return None
    above = np.flatnonzero(_softmax(zc) >= threshold)
    if above.shape[0] < 2:
        return None
    if zc.shape[0] - (above.shape[0] - 1) < keep:
        return None
    left = np.ones(zc.shape[0], dtype=bool)
    left[above[np.argsort(-zc[above], kind="stable")[:-1]]] = False
    return np.flatnonzero(left)


def _top_p(zc: np.ndarray, top_p: float, keep: int = 1) -> np.ndarray:
    """The smallest set of most likely candidates whose T=1 probability mass reaches top_p, and at least `keep` of
    them (indices into zc)."""
    p = _softmax(zc)
    # The nucleus is the most likely tokens: if those within a logit gap of the top hold top_p of the mass, it lies
    # among them, and only they need sorting (a scan, where a partial sort of 152k entries took ~1 ms).
    near = (
        _near_top(zc, lambda ids: ids.shape[0] >= keep and p[ids].sum() >= top_p)
        if p.shape[0] > _TOP_P_PREFILTER
        else None
    )
    cand = np.arange(p.shape[0]) if near is None else near
    order = cand[np.argsort(-p[cand], kind="stable")]
    csum = np.cumsum(p[order])
    last = max(int(np.searchsorted(csum, top_p)) + 1, keep)  # include the token that crosses the threshold
    return order[: min(last, order.shape[0])]


def _min_p(zc: np.ndarray, min_p: float, keep: int = 1) -> np.ndarray:
    """The candidates with at least min_p times the top one's probability; if fewer than `keep`, the `keep` most
    likely (indices into zc)."""
    sel = np.flatnonzero(zc >= np.max(zc) + np.log(min_p))
    if sel.shape[0] >= keep:
        return sel
    return _top_k(zc, min(keep, zc.shape[0]))


def draw(p: np.ndarray, rng: np.random.Generator) -> int:
    """One draw from probability vector `p` (need not be exactly normalised)."""
    c = np.cumsum(p)
    u = rng.random() * c[-1]
    return int(min(np.searchsorted(c, u, side="right"), p.shape[0] - 1))
