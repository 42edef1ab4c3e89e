"""Target and draft with different vocabulary sizes (as llama.cpp allows, e.g. Qwen2.5 7B-32B with the 0.5B draft).

Two tiny gguf-py Llama models share every id they both have; one has 40 more at the end. Both directions run: a
larger target (the Qwen2.5 case: q is shorter than p) and a larger draft (its extra ids must never reach the target).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.runtime.sampling import SamplingParams, distribution
from app.speculative.exactness import compare
from app.speculative.settings import PLAIN, SpecSettings
from app.speculative.sources import fit_to_vocab
from tests.engine.lawcheck import first_token_tv, next_token_logits
from tests.engine.tiny_gguf import write_tiny_llama

EXTRA = 40


@pytest.fixture(scope="module", params=["larger-target", "larger-draft"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    d = tmp_path_factory.mktemp("vocab-pair")
    big, small = (EXTRA, 0) if request.param == "larger-target" else (0, EXTRA)
    target = write_tiny_llama(d / "target.gguf", seed=1, extra_tokens=big, out_std=0.3)
    draft = write_tiny_llama(d / "draft.gguf", seed=2, extra_tokens=small, out_std=0.3)
    s = Session(EngineConfig(model=str(target), draft=str(draft), n_ctx=512, n_batch=64, n_threads=1))
    yield s
    s.close()


def _run(s: Session, spec: SpecSettings, sampling: SamplingParams, **kw) -> GenerationSummary:
    req = GenerationRequest(
        prompt="the cat sat on the mat and the dog", max_tokens=48, sampling=sampling, speculative=spec, **kw
    )
    return [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary


def test_the_sizes_really_differ(pair: Session) -> None:
    n_target, n_draft = pair.model.vocab.n_vocab, pair.draft_model.vocab.n_vocab  # type: ignore[union-attr]
    assert abs(n_target - n_draft) == EXTRA


def test_greedy_speculation_matches_plain_decoding(pair: Session) -> None:
    greedy = SamplingParams(temperature=0.0)
    plain = _run(pair, PLAIN, greedy, collect_margins=True)
    spec = _run(pair, SpecSettings(source="draft", n_max=4), greedy)
    verdict = compare(plain.tokens, plain.margins, spec.tokens)
    assert verdict.acceptable, verdict.describe()
    assert spec.timings.draft_n > 0


def test_sampling_never_crashes_and_never_decodes_a_foreign_id(pair: Session) -> None:
    n_target = pair.model.vocab.n_vocab
    src = pair.sources["draft"]
    proposed: list[int] = []
    original = src.propose

    def spy(*a, **kw):  # records what the draft proposed, before the engine decodes it
        d = original(*a, **kw)
        proposed.extend(d.tokens)
        assert all(q is None or q.shape[0] == n_target for q in d.dists)
        return d

    src.propose = spy  # type: ignore[method-assign]
    try:
        for seed in range(4):
            out = _run(pair, SpecSettings(source="draft", n_max=4), SamplingParams(temperature=0.8, seed=seed))
            assert out.finish_reason in ("length", "stop") and out.timings.draft_n > 0
            assert out.timings.draft_n_accepted < out.timings.draft_n  # rejections happened: the residual path ran
    finally:
        del src.propose
    assert proposed and max(proposed) < n_target


def test_sampling_law_is_preserved_across_vocab_sizes(pair: Session) -> None:
    """The existing law check (tests/engine/test_session.py) with p and q over vocabularies of different sizes."""
    s = pair
    params = SamplingParams(temperature=1.0, top_k=8)
    target, raw = next_token_logits(s, s.format_prompt(GenerationRequest(prompt="the red dog ran to")))
    p = distribution(target, params)
    assert raw.shape[0] != p.shape[0]
    # q as the draft source builds it (over the target's ids), and q over the draft's own ids (the verifier aligns).
    for q in (distribution(fit_to_vocab(raw, p.shape[0]), params), distribution(raw, params)):
        tv = first_token_tv(p, q, 20_000, seed=7)
        assert tv < 0.02, tv  # 8 outcomes, 20k draws: noise TV ~ 0.006
        assert first_token_tv(p, q, 20_000, seed=8, accept_all=True) > 0.02  # the check catches a biased verifier
    s.ctx.clear()
