"""The target's own token choice from its logits rows: sampling, logprobs, and the verdict on a step's draft."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from app.engine.logprobs import token_logprob
from app.engine.run import Run
from app.engine.types import InvalidRequest, TokenLogprob
from app.runtime import mirostat
from app.runtime.grammar import GrammarError
from app.runtime.sampling import distribution, draw, greedy_token
from app.speculative.constrained import constrained_draw, constrained_greedy, verify_constrained
from app.speculative.verify import Verdict, verify_greedy, verify_sampled

Rows = Callable[[int], np.ndarray]  # the last decode's logits row by batch index (LlamaContext.logits)


def sample(logits: np.ndarray, run: Run, history: Sequence[int]) -> int:
    """The next token from one row under the request's sampling (its grammar and mirostat state move on)."""
    params = run.request.sampling
    if run.grammar is not None:
        try:
            if params.greedy:
                token = constrained_greedy(logits, params, history, run.grammar)
            else:
                token = constrained_draw(logits, params, history, run.grammar, run.rng)
            run.grammar.accept(token)
        except GrammarError as e:
            raise InvalidRequest(f"constrained decoding failed: {e}") from e
        return token
    if params.greedy:
        return greedy_token(logits, params, history)
    if params.mirostat:
        p = distribution(logits, replace(params, mirostat_mu=run.mu), history)
        token = draw(p, run.rng)
        run.mu = mirostat.next_mu(run.mu, p, token, params.mirostat_tau, params.mirostat_eta)
        return token
    return draw(distribution(logits, params, history), run.rng)


def logprobs(
    run: Run, tokens: Sequence[int], rows: Sequence[int], logits: Rows, piece: Callable[[int], bytes]
) -> list[TokenLogprob] | None:
    """With request.logprobs: each token's entry from the target's row that chose it (before the next decode)."""
    k = run.request.logprobs
    if k is None:
        return None
    return [token_logprob(logits(r), t, k, piece) for t, r in zip(tokens, rows, strict=True)]


def verdict(logits: Rows, run: Run, history: list[int], draft: list[int], dists: list[np.ndarray | None]) -> Verdict:
    """The longest prefix of the draft the target agrees with, and its own next token (greedy, sampled or under the
    request's grammar), from the verify decode's rows: row i follows history + draft[:i]."""
    params = run.request.sampling
    if run.grammar is not None:
        try:
            return verify_constrained(logits, draft, params, history, run.grammar, run.rng)
        except GrammarError as e:
            raise InvalidRequest(f"constrained decoding failed: {e}") from e
    if params.greedy:
        return verify_greedy(
            [greedy_token(logits(i), params, history + draft[:i]) for i in range(len(draft) + 1)], draft
        )
    rows: dict[int, np.ndarray] = {}
    mus = [run.mu]  # mirostat's state at each row, as if the drafts before it were accepted
    tau, eta = params.mirostat_tau, params.mirostat_eta

    def target_dist(i: int) -> np.ndarray:
        for j in range(len(rows), i + 1):  # in order: mirostat's row j needs row j - 1's draw
            if params.mirostat and j > 0:
                mus.append(mirostat.next_mu(mus[j - 1], rows[j - 1], draft[j - 1], tau, eta))
            at = replace(params, mirostat_mu=mus[j]) if params.mirostat else params
            rows[j] = distribution(logits(j), at, history + draft[:j])
        return rows[i]

    out = verify_sampled(target_dist, draft, dists, run.rng)
    if params.mirostat:
        a = out.n_accepted
        run.mu = mirostat.next_mu(mus[a], target_dist(a), out.next_token, tau, eta)  # row a's draw is the step's own
    return out
