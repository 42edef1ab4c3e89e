"""The calibration's safety criterion compares whole outputs: tokens, length and finish reason."""

from __future__ import annotations

from app.speculative.exactness import compare_outputs

PLAIN = [5, 6, 7, 8]
MARGINS = [2.0, 1.5, 0.1, 3.0, 2.5]  # the last is the row that chose the end token


def test_identical_outputs_pass() -> None:
    v = compare_outputs(PLAIN, MARGINS, "length", list(PLAIN), "length")
    assert v.identical and v.acceptable


def test_an_early_stop_on_a_confident_row_is_unsafe() -> None:
    # The common prefix is identical: comparing only the common length would call this run identical.
    v = compare_outputs(PLAIN, MARGINS, "length", [5], "stop")
    assert not v.acceptable and v.divergence_at == 1 and "1.5" in v.describe()


def test_an_early_stop_at_a_near_tie_is_excused() -> None:
    v = compare_outputs(PLAIN, MARGINS, "length", [5, 6], "stop")
    assert v.acceptable and v.divergence_at == 2


def test_running_past_plain_decodings_end_is_judged_at_its_end_token() -> None:
    v = compare_outputs(PLAIN, MARGINS, "stop", [*PLAIN, 9], "length")
    assert not v.acceptable and v.divergence_at == 4
    assert compare_outputs(PLAIN, [*MARGINS[:4], 0.2], "stop", [*PLAIN, 9], "length").acceptable


def test_same_tokens_with_another_finish_reason_is_unsafe() -> None:
    v = compare_outputs(PLAIN, MARGINS, "length", list(PLAIN), "stop")
    assert not v.acceptable and not v.identical


def test_a_token_mismatch_is_judged_by_its_margin() -> None:
    assert not compare_outputs(PLAIN, MARGINS, "length", [5, 9, 7, 8], "length").acceptable
    assert compare_outputs(PLAIN, MARGINS, "length", [5, 6, 9, 8], "length").acceptable
