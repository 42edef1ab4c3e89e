"""Grammar-constrained token choice and verification: speculation that yields exactly plain constrained decoding.

The constrained distribution is the usual processed distribution p (penalties, top-k, top-p, min-p, temperature)
restricted to the tokens the grammar admits and renormalised; when the grammar admits none of p's support it is the
chain applied to the grammar-masked logits (what llama.cpp's sampler falls back to). Greedy picks its argmax.

A full mask costs tens of milliseconds on a 152k vocabulary (llama.cpp decodes every token's text), so the choice
checks the most likely candidates first and masks the whole vocabulary only when none of them is admitted:
- greedy: the argmax, then the top 64, then the top 2048 by logit, then all (the first admitted in logit order is
  the constrained argmax whichever tier finds it);
- sampling: draw from p and keep the draw if admitted (repeated draws are rejection sampling from the constrained
  distribution, exact), and only after many refusals build the masked distribution itself.
Verification samples the target's constrained choice at each row (the grammar advanced by the accepted draft) and
accepts a drafted token only when it matches: a token the grammar forbids is never the choice, so it is a
rejection. Matching is exact for any proposal (Leviathan et al.'s rule with a point-mass q), so the output follows
the constrained distribution whatever drafted it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from app.runtime.grammar import Grammar, GrammarError
from app.runtime.sampling import SamplingParams, adjust_logits, distribution, draw
from app.speculative.verify import Verdict

_GREEDY_TIERS = (64, 2048)
_MAX_REJECTIONS = 32  # draws refused before building the masked distribution (allowed mass below a few percent)


def constrained_greedy(logits: np.ndarray, params: SamplingParams, history: Sequence[int], grammar: Grammar) -> int:
    """The highest-logit token (after the bias and penalties) that the grammar admits."""
    z = adjust_logits(logits, params, history) if params.adjusts_logits else logits
    top = int(np.argmax(z))
    if grammar.allows(top):
        return top
    n = z.shape[0]
    for k in _GREEDY_TIERS:
        if k >= n:
            break
        cand = np.argpartition(-z, k)[:k]
        cand = cand[np.lexsort((cand, -z[cand]))]  # by logit, ties by id (as argmax)
        ok = grammar.allowed(cand.astype(np.int32))
        if ok.any():
            return int(cand[int(np.argmax(ok))])
    mask = grammar.mask()
    if not mask.any():
        raise GrammarError("the grammar admits no token here")
    return int(np.argmax(np.where(mask, z, -np.inf)))


def constrained_distribution(
    logits: np.ndarray, params: SamplingParams, history: Sequence[int], grammar: Grammar
) -> np.ndarray:
    """The constrained distribution itself (one full mask)."""
    mask = grammar.mask()
    if not mask.any():
        raise GrammarError("the grammar admits no token here")
    p = distribution(logits, params, history) * mask
    if p.sum() > 0.0:
        return np.asarray(p / p.sum())
    return distribution(np.where(mask, logits, -np.inf).astype(np.float32), params, history)


def constrained_draw(
    logits: np.ndarray,
    params: SamplingParams,
    history: Sequence[int],
    grammar: Grammar,
    rng: np.random.Generator,
) -> int:
    """One draw from the constrained distribution, by rejection from p while that is cheap."""
    p = distribution(logits, params, history)
    c = np.cumsum(p)
    for _ in range(_MAX_REJECTIONS):
        tok = int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), p.shape[0] - 1))
        if grammar.allows(tok):
            return tok
    return draw(constrained_distribution(logits, params, history, grammar), rng)


def verify_constrained(
    row_logits: Callable[[int], np.ndarray],
    draft: Sequence[int],
    params: SamplingParams,
    history: Sequence[int],
    grammar: Grammar,
    rng: np.random.Generator,
) -> Verdict:
    """Accept the draft while it matches the target's constrained choice at each row; advances `grammar` by every
    token it returns (the accepted drafts and the target's own next token)."""
    for i in range(len(draft) + 1):
        row_history = [*history, *draft[:i]]
        if params.greedy:
            tok = constrained_greedy(row_logits(i), params, row_history, grammar)
        else:
            tok = constrained_draw(row_logits(i), params, row_history, grammar, rng)
        grammar.accept(tok)
        if i == len(draft) or tok != draft[i]:
            return Verdict(i, tok)
    raise AssertionError("unreachable")
