"""Sampling maths: the processed distribution matches llama.cpp's chain semantics."""

from __future__ import annotations

import numpy as np
import pytest

from app.runtime.sampling import SamplingParams, adjust_logits, distribution, greedy_token, resolve_logit_bias

LOGITS = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05], dtype=np.float32))


def test_greedy_is_one_hot_at_argmax() -> None:
    p = distribution(LOGITS, SamplingParams(temperature=0))
    assert p.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert greedy_token(LOGITS) == 0


def test_temperature_one_is_softmax() -> None:
    p = distribution(LOGITS, SamplingParams(temperature=1.0))
    np.testing.assert_allclose(p, [0.5, 0.2, 0.15, 0.1, 0.05], rtol=1e-5)


def test_top_k_keeps_k_most_likely() -> None:
    p = distribution(LOGITS, SamplingParams(temperature=1.0, top_k=2))
    np.testing.assert_allclose(p, [0.5 / 0.7, 0.2 / 0.7, 0, 0, 0], rtol=1e-5)


def test_top_p_includes_the_token_that_crosses_the_threshold() -> None:
    p = distribution(LOGITS, SamplingParams(temperature=1.0, top_p=0.6))
    np.testing.assert_allclose(p, [0.5 / 0.7, 0.2 / 0.7, 0, 0, 0], rtol=1e-5)


def test_min_p_is_relative_to_the_top_token() -> None:
    p = distribution(LOGITS, SamplingParams(temperature=1.0, min_p=0.25))  # keeps p >= 0.125
    np.testing.assert_allclose(p, np.array([0.5, 0.2, 0.15, 0, 0]) / 0.85, rtol=1e-5)


def test_top_p_on_a_large_vocabulary_matches_a_full_sort() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(size=50_000).astype(np.float32) * 3
    p = distribution(logits, SamplingParams(temperature=0.7, top_p=0.9))
    full = np.exp(logits - logits.max()).astype(np.float64)
    full /= full.sum()
    order = np.argsort(-full)
    keep = order[: int(np.searchsorted(np.cumsum(full[order]), 0.9)) + 1]
    assert set(np.nonzero(p)[0]) == set(keep.tolist())


def test_penalties_follow_llama_cpp() -> None:
    logits = np.array([2.0, -1.0, 0.5], dtype=np.float32)
    out = adjust_logits(
        logits, SamplingParams(repeat_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.1), [0, 1, 1]
    )
    np.testing.assert_allclose(out, [2.0 / 2 - 0.5 - 0.1, -1.0 * 2 - 1.0 - 0.1, 0.5])


@pytest.mark.parametrize("bad", [{"temperature": -1}, {"top_p": 0}, {"min_p": 2}, {"top_k": -1}])
def test_invalid_parameters_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        SamplingParams(**bad)


def test_logit_bias_comes_before_the_penalties_as_in_llama_cpps_chain() -> None:
    # Token 1: log(0.2) = -1.61; +3 makes it 1.39, which a repeat penalty of 2 then halves (0.69). Penalising first
    # would give -3.22 + 3 = -0.22.
    params = SamplingParams(temperature=0, repeat_penalty=2.0, logit_bias=((1, 3.0), (0, float("-inf"))))
    out = adjust_logits(LOGITS, params, history=[1])
    assert out[1] == pytest.approx((np.log(0.2) + 3.0) / 2.0)
    assert out[0] == -np.inf
    assert greedy_token(LOGITS, params, history=[1]) == 1


def test_resolve_logit_bias_spreads_text_over_its_tokens_and_adds_repeats() -> None:
    def tokenize(text: str) -> list[int]:
        return {"ab": [1, 2], "": []}[text]

    assert resolve_logit_bias([("ab", -1.0), (2, -0.5), (4, 1.0)], tokenize, n_vocab=5) == (
        (1, -1.0),
        (2, -1.5),
        (4, 1.0),
    )
    with pytest.raises(ValueError, match="not in the vocabulary"):
        resolve_logit_bias([(5, 1.0)], tokenize, n_vocab=5)
    with pytest.raises(ValueError, match="has no tokens"):
        resolve_logit_bias([("", 1.0)], tokenize, n_vocab=5)
