"""DD weighs a fixed draft-model pick against the draft's catch-up (prefilling what its KV lacks): the table's rows
are timed with a warm draft, so on a first turn at long context the best choice without the draft model can win."""

from __future__ import annotations

import pytest

from app.policy import DraftCaps, DynamicDraftPolicy
from app.policy.dynamic import catch_up_pays
from app.speculative.settings import PLAIN, SpecSettings
from tests.policy.helpers import FP, LOOKUP, N4, WIDE, make_table

NO_DRAFT = DraftCaps(n_max=64, draft_loaded=False)
POOL = SpecSettings(source="pool", n_max=8)


@pytest.fixture()
def policy() -> DynamicDraftPolicy:
    # n4 (draft model) is the static setting and wins both ranges; without the draft model, lookup beats plain.
    table = make_table({PLAIN: [50, 40], LOOKUP: [70, 45], N4: [130, 48]}, [1000, 8000], upper=9000)
    return DynamicDraftPolicy(table, FP)


def test_catch_up_pays_when_the_whole_budget_wins_it_back() -> None:
    # 100 tokens: 2083 ms at 48 tok/s against 2222 ms at 45 tok/s, so up to ~139 ms of catch-up pays
    assert catch_up_pays(100.0, 100, 48.0, 45.0)
    assert not catch_up_pays(200.0, 100, 48.0, 45.0)
    assert catch_up_pays(200.0, 1000, 48.0, 45.0)  # a longer reply wins a larger catch-up back
    assert not catch_up_pays(1.0, 100, 45.0, 48.0)  # slower even when warm
    assert catch_up_pays(1e9, 100, 0.0, 45.0)  # no measured speed: nothing to weigh with, the table's pick stays


def test_a_catch_up_the_reply_wins_back_keeps_the_tables_pick_and_says_what_was_weighed(
    policy: DynamicDraftPolicy,
) -> None:
    settings, record = policy.decide(8000, None, WIDE)
    assert settings == N4 and record.reason == "table_row"
    assert policy.expected_tps(8000, WIDE) == 48 and policy.expected_tps(8000, NO_DRAFT) == 45
    kept, rec = policy.weigh_catch_up(settings, record, WIDE, NO_DRAFT, 100.0, 100)
    assert kept == N4 and rec.reason == "table_row" and rec.catch_up_ms == 100.0 and rec.passed_over is None


def test_a_catch_up_that_cannot_pay_runs_the_best_choice_without_the_draft_model(policy: DynamicDraftPolicy) -> None:
    settings, record = policy.decide(8000, None, WIDE, "code", "fence")
    got, rec = policy.weigh_catch_up(settings, record, WIDE, NO_DRAFT, 200.0, 100)
    assert got == LOOKUP and rec.selected == LOOKUP and rec.applied
    assert rec.reason == "catch_up" and rec.passed_over == "n4,p0" and rec.catch_up_ms == 200.0
    assert rec.content_class == "code" and rec.class_cue == "fence" and rec.prompt_tokens == 8000
    assert rec.decision_us >= record.decision_us
    d = rec.to_dict()
    assert d["reason"] == "catch_up" and d["passed_over"] == "n4,p0" and d["selected_label"] == LOOKUP.label()
    # the same catch-up over a reply of 1000 tokens pays back: the draft model runs
    assert policy.weigh_catch_up(settings, record, WIDE, NO_DRAFT, 200.0, 1000)[0] == N4


def test_above_the_calibrated_ranges_the_last_measured_speeds_stand_in(policy: DynamicDraftPolicy) -> None:
    settings, record = policy.decide(20000, None, WIDE)
    assert settings == N4 and record.reason == "out_of_range"
    assert policy.expected_tps(20000, WIDE) == 48 and policy.expected_tps(20000, NO_DRAFT) == 45
    got, rec = policy.weigh_catch_up(settings, record, WIDE, NO_DRAFT, 5000.0, 100)
    assert got == LOOKUP and rec.reason == "catch_up"


def test_only_a_table_choice_of_a_fixed_draft_model_setting_is_weighed(policy: DynamicDraftPolicy) -> None:
    override, rec = policy.decide(8000, N4, WIDE)  # the user's own fields: never second-guessed
    assert rec.reason == "override"
    assert policy.weigh_catch_up(override, rec, WIDE, NO_DRAFT, 1e6, 10) == (override, rec)
    _, applied = policy.decide(8000, None, WIDE)
    for setting in (POOL, LOOKUP):  # the pool weighs its catch-up per step; lookup has no KV to fill
        assert policy.weigh_catch_up(setting, applied, WIDE, NO_DRAFT, 1e6, 10) == (setting, applied)
    assert policy.weigh_catch_up(N4, applied, WIDE, NO_DRAFT, 0.0, 10) == (N4, applied)  # a warm draft KV
    forced = policy.with_options(force=True)
    s, rec = forced.decide(8000, PLAIN, WIDE)
    assert rec.reason == "forced"
    got, weighed = forced.weigh_catch_up(s, rec, WIDE, NO_DRAFT, 1e6, 10)
    assert got == LOOKUP and weighed.reason == "forced" and weighed.passed_over == N4.label()  # still says "forced"
