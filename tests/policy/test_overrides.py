"""Caps, request overrides, force mode, disabled, and the no-table / stale-table paths."""

from __future__ import annotations

from app.policy import DraftCaps, DynamicDraftPolicy, FrontierTable
from app.speculative.settings import PLAIN, SpecSettings
from tests.policy.helpers import FP, LOOKUP, N2, N4, N4P, N8, WIDE, make_table


def test_cap_reselects_among_measured_rows(seed_table: FrontierTable) -> None:
    policy = DynamicDraftPolicy(seed_table, FP)
    caps = DraftCaps(n_max=2, draft_loaded=True)
    selected, rec = policy.decide(3946, None, caps)
    assert selected.n_max <= 2 and selected == N2
    assert rec.reason == "capped" and rec.capped and rec.applied
    # Where the table's choice already fits, the cap changes nothing.
    selected, rec = policy.decide(131072, None, caps)
    assert selected == N2 and rec.reason == "table_row" and not rec.capped


def test_cap_zero_means_plain(seed_table: FrontierTable) -> None:
    selected, rec = DynamicDraftPolicy(seed_table, FP).decide(3946, None, DraftCaps(0, True))
    assert selected == PLAIN and rec.reason == "capped"


def test_no_draft_model_falls_back_to_rows_that_do_not_need_it() -> None:
    table = make_table({PLAIN: [50, 40], N2: [100, 60], LOOKUP: [70, 45], N8: [140, 50]}, [1000, 8000])
    policy = DynamicDraftPolicy(table, FP)
    assert policy.decide(10, None, WIDE)[0] == N8
    selected, rec = policy.decide(10, None, DraftCaps(n_max=8, draft_loaded=False))
    assert selected == LOOKUP and rec.reason == "capped" and rec.applied
    # With only draft-model candidates besides plain, plain decoding runs.
    table2 = make_table({PLAIN: [50, 40], N2: [100, 60]}, [1000, 8000])
    assert DynamicDraftPolicy(table2, FP).decide(10, None, DraftCaps(8, False))[0] == PLAIN


def test_caps_clamp_depth_of_explicit_settings() -> None:
    caps = DraftCaps(n_max=4, draft_loaded=True)
    deep = SpecSettings(n_max=16, n_min=8, p_min=0.1)
    assert caps.clamp(deep) == SpecSettings(n_max=4, n_min=4, p_min=0.1)
    assert caps.clamp(N2) == N2
    assert DraftCaps(4, False).clamp(N2) == PLAIN
    assert DraftCaps(4, False).clamp(LOOKUP) == LOOKUP


def test_override_wins_unless_forced(seed_table: FrontierTable) -> None:
    policy = DynamicDraftPolicy(seed_table, FP)
    override = SpecSettings(n_max=6, p_min=0.5)
    selected, rec = policy.decide(3946, override, WIDE)
    assert selected == override and rec.reason == "override" and not rec.applied and not rec.capped
    selected, rec = policy.decide(3946, override, DraftCaps(4, True))
    assert selected.n_max == 4 and rec.reason == "override" and rec.capped
    forced = policy.with_options(force=True)
    selected, rec = forced.decide(3946, override, WIDE)
    assert selected == N4P and rec.reason == "forced" and rec.applied
    # Force mode without an override is an ordinary decision.
    assert forced.decide(3946, None, WIDE)[1].reason == "table_row"
    # with_options does not change the original.
    assert policy.decide(3946, override, WIDE)[1].reason == "override"


def test_disabled(seed_table: FrontierTable) -> None:
    policy = DynamicDraftPolicy(seed_table, FP, default=N2, enabled=False)
    selected, rec = policy.decide(3946, None, WIDE)
    assert selected == N2 and rec.reason == "disabled" and not rec.applied
    selected, rec = policy.decide(3946, N4, WIDE)
    assert selected == N4 and rec.reason == "disabled"
    assert policy.status == "disabled"
    assert policy.with_options(enabled=True).decide(3946, None, WIDE)[0] == N4P


def test_no_table_uses_default_clamped() -> None:
    policy = DynamicDraftPolicy(None, FP, default=N8)
    selected, rec = policy.decide(100, None, DraftCaps(4, True))
    assert selected == SpecSettings(n_max=4) and rec.reason == "no_table" and not rec.applied and rec.capped
    assert policy.decide(100, N2, WIDE)[1].reason == "override"
    forced = DynamicDraftPolicy(None, FP, default=N8, force=True)
    selected, rec = forced.decide(100, N2, WIDE)
    assert selected == N8 and rec.reason == "no_table"


def test_stale_fingerprint(seed_table: FrontierTable) -> None:
    from dataclasses import replace

    other = replace(FP, n_threads=4, llama_build="b9999")
    policy = DynamicDraftPolicy(seed_table, other, default=N2)
    selected, rec = policy.decide(3946, None, WIDE)
    assert selected == N2 and rec.reason == "stale_table" and not rec.applied
    assert policy.status == "stale_table" and set(policy.stale_fields) == {"n_threads", "llama_build"}
    draftless = replace(FP, draft_name=None, draft_sha256=None)
    assert DynamicDraftPolicy(seed_table, draftless).decide(10, None, WIDE)[1].reason == "stale_table"


def test_equal_caps_objects_share_a_plan(seed_table: FrontierTable) -> None:
    policy = DynamicDraftPolicy(seed_table, FP)
    a, b = DraftCaps(2, True), DraftCaps(2, True)
    assert policy.decide(3946, None, a)[0] == policy.decide(3946, None, b)[0] == N2
    assert policy.decide(3946, None, WIDE)[0] == N4P  # switching caps back and forth stays correct
    assert policy.decide(3946, None, a)[1].reason == "capped"
    assert len(policy._plans) == 2
