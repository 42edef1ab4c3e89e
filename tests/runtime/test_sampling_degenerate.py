"""Degenerate sampling parameters: tiny temperatures are greedy, absurd penalties are refused, nothing yields NaN."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.runtime.sampling import MIN_REPEAT_PENALTY, MIN_TEMPERATURE, SamplingParams, distribution, greedy_token

F32_MAX = float(np.finfo(np.float32).max)
VOCAB = 600
RNG = np.random.default_rng(7)
LOGITS = {
    "normal": (RNG.standard_normal(VOCAB) * 8).astype(np.float32),
    "flat": np.zeros(VOCAB, dtype=np.float32),
    "huge": np.where(RNG.random(VOCAB) < 0.5, F32_MAX, -F32_MAX).astype(np.float32),
    "one_peak": np.where(np.arange(VOCAB) == 3, 1e4, -1e4).astype(np.float32),
}
HISTORY = [3, 3, 3, 5, 7, 3, 11, 599] * 8
GRID = {
    "temperature": [0.0, 1e-45, 1e-40, MIN_TEMPERATURE * 0.999, MIN_TEMPERATURE, 1e-3, 0.7, 2.0, 100.0],
    "top_k": [0, 1, 5, VOCAB, VOCAB + 5],
    "top_p": [5e-324, 1e-12, 0.5, 1.0],
    "min_p": [0.0, 1e-300, 0.3, 1.0],
    "repeat_penalty": [1e-40, MIN_REPEAT_PENALTY, 1.0, 1.3, 10.0],
    "presence_penalty": [-2.0, 0.0, 2.0],
    "frequency_penalty": [-2.0, 0.0, 2.0],
}


def _combinations(n: int) -> list[dict[str, float]]:
    keys = list(GRID)
    every = list(itertools.product(*GRID.values()))
    pick = np.random.default_rng(11).choice(len(every), size=n, replace=False)
    return [dict(zip(keys, every[i], strict=True)) for i in pick]


def test_no_accepted_combination_gives_nan() -> None:
    accepted = refused = 0
    for values in _combinations(1500):
        try:
            params = SamplingParams(**values)  # type: ignore[arg-type]
        except ValueError:
            refused += 1
            continue
        accepted += 1
        for name, logits in LOGITS.items():
            p = distribution(logits, params, HISTORY)
            assert np.all(np.isfinite(p)) and np.all(p >= 0), (name, values)
            assert abs(p.sum() - 1.0) < 1e-9, (name, values, p.sum())
            assert 0 <= greedy_token(logits, params, HISTORY) < VOCAB
    assert accepted > 500 and refused > 100  # the sweep exercised both sides of the validation


@pytest.mark.parametrize("t", [1e-40, 1e-20, MIN_TEMPERATURE / 2])
def test_tiny_temperature_is_greedy(t: float) -> None:
    params = SamplingParams(temperature=t)
    assert params.greedy
    p = distribution(LOGITS["normal"], params)
    assert p[int(np.argmax(LOGITS["normal"]))] == 1.0


def test_small_but_valid_temperature_is_sharp_not_nan() -> None:
    p = distribution(LOGITS["huge"], SamplingParams(temperature=MIN_TEMPERATURE))
    assert np.all(np.isfinite(p)) and abs(p.sum() - 1) < 1e-9


@pytest.mark.parametrize("rp", [1e-40, 0.0, -1.0, MIN_REPEAT_PENALTY / 2, 11.0])
def test_absurd_repeat_penalty_is_refused(rp: float) -> None:
    with pytest.raises(ValueError, match="repeat_penalty"):
        SamplingParams(repeat_penalty=rp)
