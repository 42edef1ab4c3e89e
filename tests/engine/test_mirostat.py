"""Mirostat under speculation: its state mu follows every committed token, drafts included, as plain decoding's would.

Checked from the outside: replaying the reply's own log-probabilities (the target's rows) through mirostat 2's rule,
every emitted token lies in the set mirostat keeps at the state the plain decoder would be in after the tokens
before it. A verify step that scored its rows with a stale mu would emit tokens outside that set.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN, SpecSettings

TAU, ETA = 0.3, 1.5  # a sharp target and a fast mu: a stale mu shows within a few drafts


def _replay(summary_logprobs: list, tau: float, eta: float) -> int:  # type: ignore[type-arg]
    """Walk mirostat 2 over the reply's rows; returns how many steps were checked (each one asserted). Stops where
    mirostat's set runs past the rows' top 20 (its renormalisation, so mu, is not known beyond)."""
    mu = 2.0 * tau
    for n, lp in enumerate(summary_logprobs):
        top = sorted(lp.top, key=lambda t: -t[2])
        kept = []
        for tok, _, logprob in top:
            if -logprob / math.log(2) > mu and kept:
                break
            kept.append((tok, logprob))
        if len(kept) == len(top):
            return n
        ids = [t for t, _ in kept]
        assert lp.token in ids, (lp.token, ids, mu)
        z = math.log(sum(math.exp(x) for _, x in kept))
        p = math.exp(dict(kept)[lp.token] - z)
        mu -= eta * (-math.log2(p) - tau)
    return len(summary_logprobs)


@pytest.mark.parametrize(
    "spec",
    [PLAIN, SpecSettings(source="draft", n_max=6, p_min=0.0)],
    ids=["plain", "draft"],
)
def test_every_token_is_in_mirostats_set_at_the_plain_decoders_state(
    small_session: Session, spec: SpecSettings
) -> None:
    sampling = SamplingParams(temperature=1.0, mirostat=2, mirostat_tau=TAU, mirostat_eta=ETA, seed=4)
    checked = drafted = 0
    for seed in range(3):
        request = GenerationRequest(
            messages=({"role": "user", "content": "Tell me a short story about a lighthouse keeper."},),
            max_tokens=40,
            sampling=replace(sampling, seed=seed),
            speculative=spec,
            logprobs=20,
            cache_prompt=False,
        )
        done = [e for e in small_session.generate(request) if isinstance(e, DoneEvent)][0]
        checked += _replay(list(done.summary.logprobs), TAU, ETA)
        drafted += done.summary.timings.draft_n_accepted
    assert checked >= 72
    if spec.source == "draft":
        assert drafted >= 6  # drafted tokens were accepted, so the verify path's mu chain was exercised
