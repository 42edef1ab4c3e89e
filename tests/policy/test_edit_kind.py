"""copy_edit's sub-class detector on labelled requests, and Dynamic Draft's sub-class -> class -> context-only chain."""

from __future__ import annotations

import pytest

from app.policy import DraftCaps, DynamicDraftPolicy, FrontierRow, new_table
from app.policy.content_class import ADDITIVE, NEAR_COPY, SUBCLASSES, TABLE_CLASSES, RequestClass
from app.policy.edit_kind import classify_request, edit_kind
from app.speculative.settings import PLAIN, SpecSettings
from tests.policy.test_classes import FP

CODE = """def load_scores(path):
    scores = {}
    with open(path) as f:
        for line in f:
            name, value = line.split(",")
            scores[name] = int(value)
    return scores


def add_bonus(scores, bonus):
    return {name: value + bonus for name, value in scores.items()}


def sort_players(scores):
    return sorted(scores, key=scores.get)
"""
PROSE = (
    "Our team spent the last quater rebuilding the onboarding flow. The old flow asked for ten peices of "
    "information before showing anything useful, and most people gave up half way. We will add a mobile version "
    "next and fix the welcome email, which often lands in the spam folder. "
) * 2
SNIPPET = "```python\ndef sum_prices(items):\n    tmp = 0\n    for item in items:\n        tmp += item.price\n    return tmp\n```"

# (label, request, expected sub-class): instructions before and after the block, fenced and bare, code and prose.
LABELLED: list[tuple[str, str, str | None]] = [
    ("rename", "Rename `load_scores` to `read_scores` everywhere and return the full file:\n\n" + CODE, NEAR_COPY),
    ("typos", PROSE + "\n\nFix the spelling mistakes in the text above and return it in full.", NEAR_COPY),
    ("reorder", "Reorder the functions alphabetically and return the whole file, otherwise unchanged.\n\n" + CODE,
     NEAR_COPY),
    ("reformat", CODE + "\nReformat this code with 2-space indentation and return the complete file.", NEAR_COPY),
    ("remove", "Remove the `sort_players` function and return the whole file, otherwise unchanged.\n\n" + CODE,
     NEAR_COPY),
    ("quote", PROSE + "\n\nQuote the sentence about the old flow word for word.", NEAR_COPY),
    ("short-rename", "Rename `tmp` to `total` and return the whole function.\n\n" + SNIPPET, NEAR_COPY),
    ("param", "Add a `strict` parameter to `load_scores` that raises on bad lines; return the whole file.\n\n" + CODE,
     ADDITIVE),
    ("docstrings", CODE + "\nAdd docstrings to every function above and return the updated file.", ADDITIVE),
    ("bug", CODE + "\nThere is a bug: blank lines crash load_scores. Fix it and return the full corrected code.",
     ADDITIVE),
    ("translate", PROSE + "\n\nTranslate this text into German and return the whole translation.", ADDITIVE),
    ("mixed", "Rename `scores` to `points` and add type hints to every function; return the full file.\n\n" + CODE,
     ADDITIVE),  # one additive ask among near-copy ones: new text cuts lookup's runs short
    ("short-add", "Add type hints to this function and return the whole function.\n\n" + SNIPPET, ADDITIVE),
    ("neutral", "Refactor this code and return the whole updated file.\n\n" + CODE, None),  # could go either way
    ("convert", CODE + "\nConvert the code above to use pathlib and return the full file.", None),
]  # fmt: skip


@pytest.mark.parametrize(("label", "text", "expected"), LABELLED, ids=[x[0] for x in LABELLED])
def test_labelled_edits_get_their_subclass(label: str, text: str, expected: str | None) -> None:
    got = classify_request(text, text)
    assert got.content_class == "copy_edit", f"{label}: the class detector must call it copy_edit first"
    assert got.subclass == expected, f"{label}: {got}"
    if expected is None:
        assert got.subclass_cue is None
    else:
        assert got.subclass_cue is not None and got.subclass_cue.startswith(expected + ":")


def test_words_in_the_block_are_not_read_as_the_instruction() -> None:
    # CODE defines add_bonus and sort_players: its edge lines are code, so only the instruction's words count.
    assert edit_kind("Rename `scores` to `points` and return the whole file.\n\n" + CODE)[0] == NEAR_COPY
    fenced = "Please rename `tmp` to `total`.\n```python\ndef add(tmp):\n    return sorted(tmp)\n```\nThanks!"
    assert edit_kind(fenced) == (NEAR_COPY, "near_copy:rename")
    # PROSE's own "we will add ... and fix" is its first line; the instruction line is the one worded as an edit
    assert edit_kind(PROSE + "\n\nCorrect the typos and return the text.")[0] == NEAR_COPY


def test_other_classes_have_no_subclass() -> None:
    for text in ("Write a Python function that adds two numbers.", "Explain how to add a column in SQL."):
        got = classify_request(text, text)
        assert got.content_class != "copy_edit" and got.subclass is None and got.subclass_cue is None
    assert classify_request("x", "x", structured_request=True) == RequestClass("structured", "request_constrained")


def test_subclass_names_belong_to_copy_edit_and_the_table() -> None:
    assert set(SUBCLASSES.values()) == {"copy_edit"} and set(SUBCLASSES) <= set(TABLE_CLASSES)


WIDE = DraftCaps(n_max=16, draft_loaded=True)
LOOKUP8 = SpecSettings(source="lookup", n_max=8)
N2 = SpecSettings(n_max=2)
N4 = SpecSettings(n_max=4)


def _rows(lo: int, hi: int, cls: str | None, speeds: dict[SpecSettings, float]) -> list[FrontierRow]:
    return [FrontierRow(lo, hi, s, v, 1.0, 3, True, content_class=cls) for s, v in speeds.items()]


def test_subclass_rows_then_class_rows_then_context_only() -> None:
    rows = _rows(0, 1024, None, {PLAIN: 50.0, N2: 60.0, N4: 55.0, LOOKUP8: 45.0})
    rows += _rows(1024, 4096, None, {PLAIN: 40.0, N2: 48.0, N4: 44.0, LOOKUP8: 38.0})
    rows += _rows(0, 1024, "copy_edit", {PLAIN: 50.0, N2: 70.0, N4: 80.0, LOOKUP8: 75.0})
    rows += _rows(0, 1024, "near_copy", {PLAIN: 50.0, N2: 70.0, N4: 78.0, LOOKUP8: 95.0})
    policy = DynamicDraftPolicy(new_table(FP, rows), FP)
    near, rec = policy.decide(600, None, WIDE, "copy_edit", "edit_instruction", "near_copy", "near_copy:rename")
    assert near == LOOKUP8 and rec.class_basis == "subclass_row" and rec.content_class == "copy_edit"
    assert rec.content_subclass == "near_copy" and rec.subclass_cue == "near_copy:rename"
    d = rec.to_dict()
    assert d["content_subclass"] == "near_copy" and d["subclass_cue"] == "near_copy:rename"
    # additive has no rows: copy_edit's decide, and the record says so
    add, rec = policy.decide(600, None, WIDE, "copy_edit", "edit_instruction", "additive", "additive:add")
    assert add == N4 and rec.class_basis == "class_row" and rec.content_subclass == "additive"
    # no sub-class at all: copy_edit's rows, as before sub-classes
    plain_class, rec = policy.decide(600, None, WIDE, "copy_edit")
    assert plain_class == N4 and rec.class_basis == "class_row" and rec.content_subclass is None
    # beyond every copy_edit row: the context-only frontier decides, sub-class or not
    far, rec = policy.decide(2000, None, WIDE, "copy_edit", None, "near_copy")
    assert far == N2 and rec.class_basis == "class_fallback" and rec.content_subclass == "near_copy"
    assert policy.select(600, WIDE, "copy_edit", "near_copy") == LOOKUP8
    # an override still wins and the record keeps both names
    over = SpecSettings(source="lookup", n_max=3)
    _, rec = policy.decide(600, over, WIDE, "copy_edit", None, "near_copy", "near_copy:rename")
    assert rec.reason == "override" and rec.class_basis == "not_applied" and rec.content_subclass == "near_copy"


def test_a_subclass_of_another_class_is_refused() -> None:
    rows = _rows(0, 1024, None, {PLAIN: 50.0, N2: 60.0})
    policy = DynamicDraftPolicy(new_table(FP, rows), FP)
    with pytest.raises(ValueError, match="sub-class 'near_copy' of 'code'"):
        policy.decide(600, None, WIDE, "code", None, "near_copy")
    with pytest.raises(ValueError, match="sub-class 'bogus'"):
        policy.decide(600, None, WIDE, "copy_edit", None, "bogus")
