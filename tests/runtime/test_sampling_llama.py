"""The sampler's maths against llama.cpp's own samplers (through its C API): DRY, typical, top-n-sigma, XTC and
dynamic temperature give what llama.cpp's give, on random logits and histories."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import llama_cpp.llama_cpp as L
import numpy as np
import pytest

from app.runtime import dry, mirostat
from app.runtime.llama import Model, Vocab
from app.runtime.sampling import SamplingParams, adjust_logits, distribution

BREAKERS = ["\n", ":", '"', "*", "the end", "###"]


@pytest.fixture(scope="module")
def vocab(smollm2_path: Path) -> Iterator[Vocab]:
    model = Model(smollm2_path)
    yield model.vocab
    model.close()


def _apply(smpl: L.llama_sampler_p, logits: np.ndarray, accept: list[int] = ()) -> dict[int, float]:
    """The candidates llama.cpp's sampler leaves (id -> logit), after it accepted `accept`."""
    for t in accept:
        L.llama_sampler_accept(smpl, t)
    n = logits.shape[0]
    data = (L.llama_token_data * n)()
    for i in range(n):
        data[i].id, data[i].logit, data[i].p = i, float(logits[i]), 0.0
    arr = L.llama_token_data_array(data, n, -1, False)
    L.llama_sampler_apply(smpl, ctypes.byref(arr))
    L.llama_sampler_free(smpl)
    return {arr.data[i].id: arr.data[i].logit for i in range(arr.size) if arr.data[i].logit != -np.inf}


def _history(rng: np.random.Generator, vocab: Vocab, breakers: dry.Breakers) -> list[int]:
    """Text-like ids with breakers and repeats of earlier stretches, ending inside a repeat of a breaker-free one."""
    words = vocab.tokenize('the cat sat on a mat: "yes" * the end ### and so on\n', False, False)
    plain = [int(t) for t in rng.integers(100, vocab.n_vocab, 60) if int(t) not in breakers.tails][:30]
    pool = plain + words
    out: list[int] = plain[:12]
    while len(out) < 150:
        if rng.random() < 0.5:
            start = int(rng.integers(0, len(out)))
            out += out[start : start + int(rng.integers(2, 12))]
        else:
            out += [pool[int(i)] for i in rng.integers(0, len(pool), int(rng.integers(1, 6)))]
    return out + plain[:12] + words[:1] + plain[: int(rng.integers(3, 8))]


@pytest.mark.parametrize("seed", range(6))
def test_dry_matches_llama_cpp(vocab: Vocab, seed: int) -> None:
    rng = np.random.default_rng(seed)
    breakers = dry.resolve_breakers(BREAKERS, vocab.all_pieces(), lambda s: vocab.tokenize(s, False, False))
    history = _history(rng, vocab, breakers)
    mult, base = float(rng.uniform(0.3, 1.5)), float(rng.uniform(1.2, 3.0))
    allowed, last_n = int(rng.integers(1, 4)), [20, 64, 100][seed % 3]
    raw = (ctypes.c_char_p * len(BREAKERS))(*[b.encode() for b in BREAKERS])
    smpl = L.llama_sampler_init_dry(vocab.ptr, mult, base, allowed, last_n, raw, len(BREAKERS))
    zeros = np.zeros(vocab.n_vocab, dtype=np.float32)
    theirs = _apply(smpl, zeros, history)
    ref = np.array([-theirs[i] for i in range(vocab.n_vocab)])
    params = SamplingParams(
        dry_multiplier=mult, dry_base=base, dry_allowed_length=allowed, dry_penalty_last_n=last_n, dry_breakers=breakers
    )
    ours = -adjust_logits(zeros, params, history)
    assert np.count_nonzero(ref) >= 1  # the history does repeat
    assert set(np.flatnonzero(ours)) == set(np.flatnonzero(ref))
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


def _logits(seed: int, n: int = 2000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * rng.uniform(1.0, 4.0)).astype(np.float32)


def _support(p: np.ndarray) -> set[int]:
    return set(np.flatnonzero(p > 0).tolist())


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("typical_p", [0.2, 0.6, 0.95])
def test_typical_keeps_llama_cpps_tokens(seed: int, typical_p: float) -> None:
    z = _logits(seed)
    theirs = _apply(L.llama_sampler_init_typical(typical_p, 0), z)
    assert _support(distribution(z, SamplingParams(temperature=1.0, typical_p=typical_p))) == set(theirs)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n_sigma", [0.5, 1.0, 2.5])
def test_top_n_sigma_keeps_llama_cpps_tokens(seed: int, n_sigma: float) -> None:
    z = _logits(seed)
    theirs = _apply(L.llama_sampler_init_top_n_sigma(n_sigma), z)
    assert _support(distribution(z, SamplingParams(temperature=1.0, top_n_sigma=n_sigma))) == set(theirs)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("threshold", [0.05, 0.1, 0.3])
def test_xtc_when_it_fires_keeps_llama_cpps_tokens(seed: int, threshold: float) -> None:
    z = _logits(seed, 50) * 2.0  # a few tokens above the threshold
    theirs = _apply(L.llama_sampler_init_xtc(1.0, threshold, 0, 1234), z)  # probability 1: it always fires
    ours = distribution(z, SamplingParams(temperature=1.0, xtc_probability=1.0, xtc_threshold=threshold))
    assert _support(ours) == set(theirs)


def test_xtc_is_the_mixture_of_its_two_outcomes() -> None:
    z = np.concatenate([[4.0, 3.6, 3.1], _logits(3, 50)]).astype(np.float32)  # three tokens above 5 %
    plain = distribution(z, SamplingParams(temperature=0.7))
    fired = distribution(z, SamplingParams(temperature=0.7, xtc_probability=1.0, xtc_threshold=0.05))
    mixed = distribution(z, SamplingParams(temperature=0.7, xtc_probability=0.3, xtc_threshold=0.05))
    p1 = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    above = sorted(np.flatnonzero(p1 >= 0.05).tolist(), key=lambda t: -p1[t])
    assert len(above) >= 3
    assert _support(plain) - _support(fired) == set(above[:-1])  # all above the threshold but the least likely
    np.testing.assert_allclose(mixed, 0.7 * plain + 0.3 * fired)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("temp", "delta", "exponent"), [(0.8, 0.5, 1.0), (1.0, 0.9, 2.0), (0.2, 0.3, 0.5)])
def test_dynamic_temperature_gives_llama_cpps_distribution(
    seed: int, temp: float, delta: float, exponent: float
) -> None:
    z = _logits(seed, 300)
    theirs = _apply(L.llama_sampler_init_temp_ext(temp, delta, exponent), z)
    logits = np.array([theirs[i] for i in range(z.shape[0])], dtype=np.float64)
    ref = np.exp(logits - logits.max())
    ours = distribution(z, SamplingParams(temperature=temp, dynatemp_range=delta, dynatemp_exponent=exponent))
    np.testing.assert_allclose(ours, ref / ref.sum(), rtol=1e-4, atol=1e-7)


def test_dynamic_temperature_around_zero_still_samples() -> None:
    assert not SamplingParams(temperature=0.0, dynatemp_range=0.5).greedy
    assert SamplingParams(temperature=0.0).greedy


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(("tau", "eta"), [(5.0, 0.1), (3.0, 0.5)])
def test_mirostat_keeps_llama_cpps_tokens_step_after_step(version: int, tau: float, eta: float) -> None:
    """Twenty draws in a row: each step's candidates and probabilities are llama.cpp's, so its state mu (updated
    from the token llama.cpp drew) moves as llama.cpp's does."""
    n = 3000
    smpl = (
        L.llama_sampler_init_mirostat(n, 42, tau, eta, mirostat.M)
        if version == 1
        else L.llama_sampler_init_mirostat_v2(42, tau, eta)
    )
    mu = mirostat.initial_mu(tau)
    data = (L.llama_token_data * n)()
    for step in range(20):
        z = _logits(100 + step, n)
        for i in range(n):
            data[i].id, data[i].logit, data[i].p = i, float(z[i]), 0.0
        arr = L.llama_token_data_array(data, n, -1, False)
        L.llama_sampler_apply(smpl, ctypes.byref(arr))
        theirs = {arr.data[i].id: arr.data[i].p for i in range(arr.size)}
        drawn = arr.data[arr.selected].id
        ours = mirostat.distribution(z.astype(np.float64), version, tau, mu)
        assert _support(ours) == set(theirs), step
        np.testing.assert_allclose([ours[t] for t in theirs], list(theirs.values()), rtol=1e-4, atol=1e-6)
        mu = mirostat.next_mu(mu, ours, drawn, tau, eta)
    L.llama_sampler_free(smpl)


@pytest.mark.parametrize(
    ("allowed", "last_n", "base"),
    [(0, 300, 1.75), (2, 4000, 1.75), (3, 4000, 1.0), (2, 4000, 30.0)],
    ids=["allowed-0", "long-window", "base-1", "steep-base"],
)
def test_dry_on_long_and_degenerate_histories_matches_llama_cpp(
    vocab: Vocab, allowed: int, last_n: int, base: float
) -> None:
    """A 4k-token window with long copies in it (and a run of one token: the longest repeats there are), no
    breakers: what llama.cpp's Z-algorithm finds, the vectorised scan finds, the exponent's clamp included."""
    rng = np.random.default_rng(allowed + last_n)
    text = [int(t) for t in rng.integers(100, vocab.n_vocab, 1500)]
    history = text + text[200:900] + [777] * 300 + text[:1200] + text[50:400] + [777] * 40
    smpl = L.llama_sampler_init_dry(vocab.ptr, 0.5, base, allowed, last_n, None, 0)
    zeros = np.zeros(vocab.n_vocab, dtype=np.float32)
    theirs = _apply(smpl, zeros, history)
    ref = np.array([-theirs[i] for i in range(vocab.n_vocab)], dtype=np.float64)
    params = SamplingParams(
        dry_multiplier=0.5, dry_base=base, dry_allowed_length=allowed, dry_penalty_last_n=last_n, dry_breakers=None
    )
    ours = -adjust_logits(zeros, params, history)
    assert np.count_nonzero(ref) >= 1
    assert set(np.flatnonzero(ours)) == set(np.flatnonzero(ref))
    np.testing.assert_allclose(ours, ref, rtol=1e-4)


def _peaked(seed: int, n: int) -> np.ndarray:
    """Logits where a handful of tokens hold most of the mass, so min_keep decides how many stay."""
    z = _logits(seed, n)
    z[: 3 + seed % 3] += 12.0
    return z


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("min_keep", [0, 1, 7, 40])
@pytest.mark.parametrize("n", [300, 4000])  # above 1024 candidates top-p scans near the top before sorting
def test_min_keep_keeps_llama_cpps_tokens(seed: int, min_keep: int, n: int) -> None:
    """llama.cpp's min_keep: top-p, min-p and typical keep at least that many tokens. Each sampler alone, on logits where its own rule keeps fewer, against llama.cpp's sampler with the same min_keep."""
    z = _peaked(seed, n)
    cases = [
        (L.llama_sampler_init_top_p(0.9, min_keep), {"top_p": 0.9}),
        (L.llama_sampler_init_min_p(0.05, min_keep), {"min_p": 0.05}),
        (L.llama_sampler_init_typical(0.5, min_keep), {"typical_p": 0.5}),
    ]
    for smpl, knobs in cases:
        theirs = set(_apply(smpl, z))
        ours = _support(distribution(z, SamplingParams(temperature=1.0, min_keep=min_keep, **knobs)))  # type: ignore[arg-type]
        assert ours == theirs, knobs
        unbounded = _support(distribution(z, SamplingParams(temperature=1.0, **knobs)))  # type: ignore[arg-type]
        if min_keep > len(unbounded):
            assert len(ours) == min_keep, knobs  # it was min_keep that kept them


@pytest.mark.parametrize("min_keep", [0, 5, 6])
def test_xtc_does_not_cut_below_min_keep_as_in_llama_cpp(min_keep: int) -> None:
    """Eight tokens, four above XTC's threshold: a cut leaves five, so min_keep 6 stops it, as llama.cpp's does."""
    z = np.array([3.0, 2.9, 2.8, 2.7, 0.0, -0.5, -1.0, -1.5], dtype=np.float32)
    theirs = set(_apply(L.llama_sampler_init_xtc(1.0, 0.1, min_keep, 7), z))
    ours = _support(
        distribution(z, SamplingParams(temperature=1.0, xtc_probability=1.0, xtc_threshold=0.1, min_keep=min_keep))
    )
    assert ours == theirs
    assert len(ours) == (8 if min_keep == 6 else 5)
