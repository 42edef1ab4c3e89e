"""The in-request guard: speculation that realizes fewer tokens per ms than plain decoding pauses and probes again.

Pure tests on step sequences, then a real session (SmolLM2-135M) whose default draft source is a toy one made to lose:
it proposes the last token again and takes 20 ms to do it."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary, StepEvent
from app.runtime.sampling import SamplingParams
from app.speculative import guard as g
from app.speculative import registry
from app.speculative.exactness import compare
from app.speculative.guard import SpeculationGuard
from app.speculative.settings import PLAIN, SpecSettings
from app.speculative.sources import Draft
from tests.speculative.test_registry import RepeatSource


def _spec_steps(guard: SpeculationGuard, n: int, tokens: int, ms: float, at: int = 0) -> int:
    """n speculative steps (4 drafted each) that commit `tokens` in `ms`; returns the reply length after them."""
    for _ in range(n):
        assert guard.speculate()
        at += tokens
        guard.observe(4, tokens, 1.0, ms - 1.0, True, at)
    return at


def test_a_probe_that_loses_stops_early_then_probes_again_after_a_doubled_pause() -> None:
    guard = SpeculationGuard(plain_ms=10.0)  # plain: 0.1 token per ms
    # 1 token per 20 ms loses 10 ms a step against plain: past LOSS_BUDGET (4 plain decodes) after the 5th step.
    at = _spec_steps(guard, 5, tokens=1, ms=20.0)
    assert not guard.speculate() and [e.action for e in guard.events] == ["plain"]
    first = guard.events[0]
    assert g.MIN_STEPS <= first.token == 5 < g.WINDOW and first.steps == g.BACKOFF
    assert first.spec_tok_s == pytest.approx(50.0) and first.plain_tok_s == pytest.approx(100.0)
    for _ in range(g.BACKOFF):  # the plain steps it forces, each a sample of plain decoding
        at += 1
        guard.observe(0, 1, 0.0, 10.0, True, at)
    assert guard.speculate() and guard.events[-1].action == "probe"
    _spec_steps(guard, 5, tokens=1, ms=20.0, at=at)  # the probe loses too: a pause twice as long
    assert guard.events[-1].action == "plain" and guard.events[-1].steps == 2 * g.BACKOFF


def test_a_small_loss_is_judged_over_the_whole_window() -> None:
    guard = SpeculationGuard(plain_ms=10.0)
    _spec_steps(guard, g.WINDOW - 1, tokens=1, ms=12.0)  # 2 ms a step behind: under the budget until the window ends
    assert guard.speculate() and guard.events == []
    _spec_steps(guard, 1, tokens=1, ms=12.0)
    assert [e.action for e in guard.events] == ["plain"]  # 0.083 token per ms: more than 10% behind


def test_a_window_that_keeps_up_with_plain_decoding_changes_nothing() -> None:
    guard = SpeculationGuard(plain_ms=10.0)
    _spec_steps(guard, 5 * g.WINDOW, tokens=3, ms=25.0)  # 0.12 token per ms
    _spec_steps(guard, g.WINDOW, tokens=1, ms=10.5)  # within the margin of plain's 0.1
    assert guard.speculate() and guard.events == []


def test_with_nothing_known_of_plain_it_measures_plain_first() -> None:
    guard = SpeculationGuard()  # a fresh process: no one-row decode measured yet
    for i in range(g.PLAIN_SAMPLES):  # measuring, not a verdict: no event (the first decode has one-off work)
        assert not guard.speculate()
        guard.observe(0, 1, 0.0, 500.0 if i == 0 else 10.0, i > 0, i + 1)
    assert guard.speculate() and guard.events == [] and guard.plain_ms == pytest.approx(10.0)
    _spec_steps(guard, 5, tokens=1, ms=20.0, at=g.PLAIN_SAMPLES)
    assert [e.action for e in guard.events] == ["plain"]


def test_steps_with_one_off_work_decide_nothing() -> None:
    guard = SpeculationGuard(plain_ms=10.0)
    for i in range(3 * g.WINDOW):
        guard.observe(4, 1, 1.0, 500.0, False, i + 1)  # first verifies of each batch size: warm-up, not a sample
    assert guard.speculate() and guard.events == []


class SlowRepeat(RepeatSource):
    """The toy repeat source, made to lose: 20 ms a draft, as a draft model several times too slow for its target."""

    name: ClassVar[str] = "slow-repeat"

    def propose(
        self,
        history: Sequence[int],
        n_max: int,
        n_min: int,
        p_min: float,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        t0 = time.perf_counter()
        time.sleep(0.02)
        d = super().propose(history, n_max, n_min, p_min, sampling, rng)
        d.draft_ms = (time.perf_counter() - t0) * 1000.0
        return d


@pytest.fixture(scope="module")
def slow_registered() -> Iterator[None]:
    registry.register(SlowRepeat)
    yield
    registry.unregister(SlowRepeat.name)


def _generate(session: Session, spec: SpecSettings | None) -> tuple[GenerationSummary, list[StepEvent]]:
    req = GenerationRequest(
        messages=({"role": "user", "content": "Write a short poem about the sea."},),
        max_tokens=64,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
        collect_margins=True,
    )
    events = list(session.generate(req))
    steps = [e for e in events if isinstance(e, StepEvent)]
    return next(e for e in events if isinstance(e, DoneEvent)).summary, steps


def test_a_default_that_loses_decodes_plain_within_the_window_and_says_so(
    slow_registered: None, smollm2_path: Path
) -> None:
    slow = SpecSettings(SlowRepeat.name, n_max=4)
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=1024, n_batch=128, default_spec=slow))
    try:
        plain, _ = _generate(s, PLAIN)
        out, steps = _generate(s, None)  # no table, no request setting: the engine default runs, guarded
        asked, _ = _generate(s, slow)  # the same setting asked for by the request runs as asked
    finally:
        s.close()
    dd = out.dynamic_draft
    assert dd is not None and dd["reason"] == "no_table" and out.settings == slow
    events = dd["guard"]
    assert events[0]["action"] == "plain" and events[0]["spec_tok_s"] < events[0]["plain_tok_s"]
    # Plain decoding measured first (nothing was known of it), then one short probe: off once it lost the budget.
    pattern = "".join("D" if st.drafted else "." for st in steps)
    assert pattern.startswith("." * g.PLAIN_SAMPLES + "D"), pattern
    first_probe = pattern[g.PLAIN_SAMPLES :].split(".")[0]
    assert g.MIN_STEPS <= len(first_probe) < g.WINDOW, pattern
    assert compare(plain.tokens, plain.margins, out.tokens).acceptable  # the output is plain decoding's
    assert "guard" not in (asked.dynamic_draft or {}) and asked.timings.draft_n > 2 * out.timings.draft_n


def test_the_reply_footer_says_what_the_guard_did() -> None:
    from app.gui.chat_request import format_stats, guard_note

    events = [
        {"token": 12, "action": "plain", "steps": 16, "spec_tok_s": 12.8, "plain_tok_s": 65.4},
        {"token": 28, "action": "probe"},
        {"token": 36, "action": "plain", "steps": 32, "spec_tok_s": 13.0, "plain_tok_s": 67.8},
    ]
    assert guard_note(events) == "guard: plain from token 12 (13 vs 65 tok/s), 1 probe"
    assert guard_note(None) == "" and guard_note([{"token": 3, "action": "probe"}]) == ""
    stats = {"tok_s": 30.0, "tokens": 64, "dd": {"reason": "no_table", "setting": "slow-repeat n4,p0", "guard": events}}
    assert "(no_table; guard: plain from token 12" in format_stats(stats)
