"""Grammar-constrained choice and verification on llama.cpp's real grammar sampler (SmolLM2's vocabulary).

The laws are checked on fixed logits rows, so thousands of draws need no decoding: the tiered greedy choice equals the
argmax over the full mask, draws and speculative verification both follow the constrained distribution.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.runtime.grammar import Grammar, GrammarError
from app.runtime.llama import Model
from app.runtime.sampling import SamplingParams
from app.speculative.constrained import (
    constrained_distribution,
    constrained_draw,
    constrained_greedy,
    verify_constrained,
)

GBNF = 'root ::= ("yes" | "no" | "maybe") "."'


@pytest.fixture(scope="module")
def model(smollm2_path: Path) -> Iterator[Model]:
    m = Model(smollm2_path)
    yield m
    m.close()


@pytest.fixture
def grammar(model: Model) -> Iterator[Grammar]:
    g = Grammar(model.vocab.ptr, model.vocab.n_vocab, GBNF)
    yield g
    g.close()


def _token(model: Model, text: str) -> int:
    ids = model.vocab.tokenize(text, add_special=False, parse_special=False)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def test_invalid_grammar_is_an_error_with_the_parsers_reason(model: Model) -> None:
    with pytest.raises(GrammarError, match="Undefined rule identifier 'nope'"):
        Grammar(model.vocab.ptr, model.vocab.n_vocab, "root ::= nope")
    with pytest.raises(GrammarError, match="invalid grammar"):
        Grammar(model.vocab.ptr, model.vocab.n_vocab, 'root ::= "unterminated')


def test_a_forbidden_token_is_refused_not_passed_to_llama_cpp(model: Model, grammar: Grammar) -> None:
    with pytest.raises(GrammarError):
        grammar.accept(_token(model, "the"))  # llama.cpp itself would abort the process here
    assert grammar.allows(_token(model, "yes"))
    grammar.accept(_token(model, "yes"))
    assert grammar.allowed(np.array([_token(model, "."), _token(model, "yes")], dtype=np.int32)).tolist() == [
        True,
        False,
    ]
    assert not grammar.allows(model.vocab.eos)  # not before the grammar is complete
    grammar.accept(_token(model, "."))
    assert grammar.allows(model.vocab.eos)


@pytest.mark.parametrize("rank", [0, 10, 500, 30000])
def test_tiered_greedy_equals_the_argmax_over_the_full_mask(model: Model, grammar: Grammar, rank: int) -> None:
    rng = np.random.default_rng(rank)
    z = rng.normal(size=model.vocab.n_vocab).astype(np.float32)
    mask = grammar.mask()
    order = np.argsort(-z)
    # Put the best admitted token at `rank`: every token above it is forbidden.
    allowed_ids = np.flatnonzero(mask)
    best = int(allowed_ids[np.argmax(z[allowed_ids])])
    forbidden_top = [int(t) for t in order if not mask[t]][:rank]
    z[best] = z[forbidden_top[-1]] - 1e-3 if rank else z[order[0]] + 1.0
    expected = int(np.argmax(np.where(mask, z, -np.inf)))
    assert constrained_greedy(z, SamplingParams(), [], grammar) == expected


def _law(model: Model) -> tuple[np.ndarray, list[int]]:
    """Logits where forbidden tokens hold about half the mass: both the fast draw and the rejections run."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=model.vocab.n_vocab).astype(np.float32)
    favoured = [_token(model, "yes"), _token(model, "no"), _token(model, "may")]
    for t, v in zip(favoured, (9.0, 8.5, 8.0), strict=True):
        z[t] = v
    z[_token(model, "the")] = 9.5  # forbidden and the most likely
    return z, favoured


def _close(counts: Counter[int], p: np.ndarray, n: int) -> None:
    for tok, prob in enumerate(p):
        if prob > 0.01:
            assert abs(counts[tok] / n - prob) < 4 * np.sqrt(prob * (1 - prob) / n) + 0.005, (tok, counts[tok], prob)
    assert sum(c for t, c in counts.items() if p[t] == 0.0) == 0


def test_draws_follow_the_constrained_distribution(model: Model, grammar: Grammar) -> None:
    z, _ = _law(model)
    params = SamplingParams(temperature=0.9, top_k=40)
    p = constrained_distribution(z, params, [], grammar)
    rng = np.random.default_rng(1)
    n = 1500
    counts = Counter(constrained_draw(z, params, [], grammar, rng) for _ in range(n))
    _close(counts, p, n)


def test_speculative_verification_follows_the_constrained_distribution(model: Model, grammar: Grammar) -> None:
    """Whatever was drafted (an admitted token, a forbidden one), the emitted token's law is the constrained one."""
    z, favoured = _law(model)
    params = SamplingParams(temperature=0.9, top_k=40)
    p = constrained_distribution(z, params, [], grammar)
    after = z.copy()
    after[_token(model, ".")] = 12.0  # the next row (after an accepted draft) expects the full stop
    rng = np.random.default_rng(2)
    n = 1000
    for drafted in (favoured[1], _token(model, "the")):
        counts: Counter[int] = Counter()
        accepted = 0
        for _ in range(n):
            g = grammar.clone()
            verdict = verify_constrained(lambda i: after if i else z, [drafted], params, [], g, rng)
            counts[drafted if verdict.n_accepted else verdict.next_token] += 1
            accepted += verdict.n_accepted
            g.close()
        _close(counts, p, n)
        if p[drafted] == 0.0:
            assert accepted == 0  # a token the grammar forbids is always a rejection
