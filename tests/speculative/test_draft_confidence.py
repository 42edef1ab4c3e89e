"""A greedy draft's confidence (what p_min is compared with): the top-1 probability among the 10 most likely tokens,
as llama.cpp's drafts compute it, and no softmax at all when no p_min asks for it."""

from __future__ import annotations

import numpy as np
import pytest

from app.runtime.sampling import SamplingParams
from app.speculative.sources import CONFIDENCE_TOP_K, Draft, _top1_probability, draft_autoregressive


def _reference(logits: np.ndarray) -> float:
    top = np.sort(logits.astype(np.float64))[-CONFIDENCE_TOP_K:]
    return float(1.0 / np.exp(top - top[-1]).sum())


def test_the_top_ten_decide_not_the_whole_vocabulary() -> None:
    # One token 1 above nine others, and 100k more 2 below it: llama.cpp's top-k 10 softmax gives e / (e + 9).
    logits = np.full(100_010, 3.0, dtype=np.float32)
    logits[:9] = 4.0
    logits[500] = 5.0
    tok, conf = _top1_probability(logits)
    assert tok == 500
    assert conf == pytest.approx(np.e / (np.e + 9), rel=1e-9)
    full = 1.0 / np.exp(logits.astype(np.float64) - 5.0).sum()
    assert full < 0.001  # what a softmax over the whole vocabulary would have said: every p_min would stop it


@pytest.mark.parametrize("scale, top", [(1.0, None), (2.5, 30.0), (2.5, 18.0), (2.5, 12.0), (0.0, None)])
def test_exact_on_flat_peaked_and_tied_logits(scale: float, top: float | None) -> None:
    rng = np.random.default_rng(3)
    logits = (rng.standard_normal(248_320) * scale).astype(np.float32)
    if top is not None:
        logits[7] = top
        logits[8] = top - 0.5
    tok, conf = _top1_probability(logits)
    assert logits[tok] == logits.max()
    assert conf == pytest.approx(_reference(logits), rel=1e-7, abs=1e-9)


def test_p_min_stops_on_the_top_ten_confidence_and_p_min_0_skips_it() -> None:
    logits = np.full(1000, 3.0, dtype=np.float32)
    logits[:9] = 4.0
    logits[500] = 5.0  # confidence e / (e + 9) = 0.232 at every position
    greedy, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)

    def run(p_min: float) -> Draft:
        out = Draft("test")
        draft_autoregressive(out, lambda: logits, lambda _tok: None, 4, 0, p_min, greedy, rng)
        return out

    assert run(0.23).tokens == [500] * 4 and run(0.23).confidence == pytest.approx([0.232] * 4, abs=1e-3)
    assert run(0.24).tokens == []
    free = run(0.0)
    assert free.tokens == [500] * 4 and all(np.isnan(c) for c in free.confidence)
