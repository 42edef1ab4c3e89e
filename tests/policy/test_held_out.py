"""Cross-validation over a range's prompts (app.policy.held_out): a row that wins only on the prompts it was chosen
on is not adopted; one that wins on the prompts left out is. Measurements are written for the tests."""

from __future__ import annotations

import json

import pytest

from app.policy import DynamicDraftPolicy, FrontierRow, FrontierTable, new_table
from app.policy.frontier import frontier_choices
from app.policy.held_out import cross_validate
from app.policy.report import comparison_rows, to_csv, to_markdown
from app.policy.schema import validate_table_json
from app.speculative.settings import PLAIN, SpecSettings
from tests.policy.helpers import FP, N2, WIDE

LOOKUP = SpecSettings(source="lookup", n_max=8)


def _row(s: SpecSettings, per_prompt: tuple[float, ...], cls: str | None = None) -> FrontierRow:
    """A row of [0, 1000) whose combined median is the mean of its prompts' medians (spread 0.5, 3 repeats)."""
    tps = sum(per_prompt) / len(per_prompt)
    return FrontierRow(0, 1000, s, tps, 0.5, 3, True, prompt_tokens=500, content_class=cls, prompt_tps=per_prompt)


def _table(lookup: tuple[float, ...]) -> FrontierTable:
    """[0, 1000): two prompts, lookup as given, the draft within noise of plain; [1000, 4000): one prompt, lookup
    slow, so plain decoding is the best static setting."""
    far = [FrontierRow(1000, 4000, s, tps, 0.5, 3, True, prompt_tokens=2000) for s, tps in LONG.items()]
    return new_table(FP, [_row(PLAIN, (40.0, 40.0)), _row(N2, (40.2, 40.2)), _row(LOOKUP, lookup), *far])


LONG = {PLAIN: 30.0, N2: 30.1, LOOKUP: 20.0}


def test_a_row_that_wins_on_one_prompt_only_is_rejected() -> None:
    # Lookup copies the first prompt (90 tok/s) and loses on the second (30): 60 together, far past plain's 40 and
    # past any noise margin; chosen without the first prompt it is never picked, chosen without the second it loses.
    static, (choice, _) = frontier_choices(_table(lookup=(90.0, 30.0)))
    assert static is not None and static.setting == PLAIN
    assert choice.selected == PLAIN and choice.reason == "fallback_held_out"
    assert choice.fastest_row is not None and choice.fastest_row.setting == LOOKUP
    check = choice.held_out
    assert check is not None and check.prompts == 2 and check.supported == 0 and not check.holds
    assert check.gain == pytest.approx((1.0 * (30.0 / 40.0)) ** 0.5 - 1.0)


def test_a_row_that_wins_on_every_held_out_prompt_is_kept() -> None:
    static, (choice, _) = frontier_choices(_table(lookup=(60.0, 56.0)))
    assert static is not None and static.setting == PLAIN
    assert choice.selected == LOOKUP and choice.reason == "table_row"
    check = choice.held_out
    assert check is not None and check.supported == 2 and check.holds
    assert check.gain == pytest.approx(((56.0 / 40.0) * (60.0 / 40.0)) ** 0.5 - 1.0)


def test_one_prompt_has_nothing_to_hold_out() -> None:
    rows = [FrontierRow(0, 1000, s, tps, 0.5, 3, True) for s, tps in ((PLAIN, 40.0), (LOOKUP, 60.0))]
    _, (choice,) = frontier_choices(new_table(FP, rows))
    assert choice.selected == LOOKUP and choice.reason == "table_row" and choice.held_out is None
    assert cross_validate(rows, rows[0], 0.01) is None


def test_three_prompts_each_left_out_in_turn() -> None:
    # Wins clearly on two prompts of three and loses a little on the third: held out, the two wins carry it.
    plain = _row(PLAIN, (40.0, 40.0, 40.0))
    lookup = _row(LOOKUP, (60.0, 58.0, 38.0))
    check = cross_validate([plain, lookup], plain, 0.02)
    assert check is not None and check.prompts == 3 and check.supported == 2 and check.holds
    # The same gains on one prompt only: left out, it is never chosen again, and the others lose.
    lookup = _row(LOOKUP, (90.0, 38.0, 38.0))
    check = cross_validate([plain, lookup], plain, 0.02)
    assert check is not None and check.supported == 0 and not check.holds


def test_the_decision_record_says_why_the_baseline_runs() -> None:
    table = new_table(
        FP,
        [
            _row(PLAIN, (40.0,)),  # context-only: one prompt
            _row(PLAIN, (40.0, 40.0), "copy_edit"),
            _row(LOOKUP, (90.0, 30.0), "copy_edit"),
        ],
    )
    policy = DynamicDraftPolicy(table, FP)
    selected, rec = policy.decide(500, None, WIDE, content_class="copy_edit")
    assert selected == PLAIN and rec.applied
    assert rec.reason == "fallback_held_out" and rec.class_basis == "class_row"
    assert rec.to_dict()["reason"] == "fallback_held_out"


def test_per_prompt_medians_survive_the_file_and_the_report_shows_the_check() -> None:
    table = _table(lookup=(90.0, 30.0))
    text = json.dumps(table.to_dict())
    validate_table_json(text)
    again = FrontierTable.from_dict(json.loads(text))
    assert [r.prompt_tps for r in again.rows] == [r.prompt_tps for r in table.rows]
    rows = comparison_rows(again)
    assert "| Held-out vs baseline |" in to_markdown(rows)
    assert "won 0 of 2 held out, -13.4% (margin 1.2%)" in to_markdown(rows)
    assert "| one prompt |" in to_markdown(rows)  # the long range had nothing to hold out
    head, line, long = to_csv(rows).splitlines()
    assert head.endswith(",held_out_prompts,held_out_supported,held_out_gain") and line.endswith(",2,0,-13.4")
    assert long.endswith(",,,")
    bad = table.to_dict()
    bad["rows"][0]["prompt_tps"] = [40.0, -1.0]
    with pytest.raises(ValueError, match="prompt_tps"):
        validate_table_json(json.dumps(bad))


def test_the_sweep_keeps_each_prompts_median_where_a_setting_ran_on_two_or_more() -> None:
    from app.calibration.runner import prompt_medians

    cell = ("code", 512)
    samples = {
        ((cell, 1), PLAIN): [20.0, 22.0, 21.0],
        ((cell, 0), PLAIN): [10.0, 12.0],
        ((cell, 0), LOOKUP): [30.0],
        ((cell, 1), LOOKUP): [10.0, 14.0],
        ((cell, 0), N2): [15.0],  # pruned by the budget before the second prompt: nothing to cross-validate
        (((None, 512), 0), PLAIN): [9.0],
        ((cell, 1), N2): [],  # a failed run: no values
    }
    got = prompt_medians(samples)
    assert got == {(cell, PLAIN): (11.0, 21.0), (cell, LOOKUP): (30.0, 12.0)}


def test_a_range_where_nothing_beats_the_baseline_still_reports_its_prompts() -> None:
    _, (choice, long) = frontier_choices(_table(lookup=(30.0, 28.0)))
    assert choice.selected == PLAIN and choice.reason == "fallback_static"  # the draft's +0.5% is within noise
    assert choice.held_out is not None and choice.held_out.prompts == 2 and choice.held_out.gain == 0.0
    assert long.held_out is None  # one prompt there
