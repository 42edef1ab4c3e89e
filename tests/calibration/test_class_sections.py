"""The calibration's class sections: which prompts a sweep measures, and that each section's prompts are its class."""

from __future__ import annotations

import pytest

from app.calibration.classes import SECTIONS, class_corpus
from app.calibration.runner import INSTRUCTION, Plan, cell_corpora, plan_for, sweep_cells
from app.policy.content_class import CONTENT_CLASSES, SUBCLASSES, TABLE_CLASSES, content_class
from app.policy.edit_kind import edit_kind
from app.speculative.settings import PLAIN


@pytest.mark.parametrize("cls", CONTENT_CLASSES)
@pytest.mark.parametrize("chars", [700, 2500, 9000])
def test_each_section_prompt_is_detected_as_its_class(cls: str, chars: int) -> None:
    text = class_corpus(cls)
    doc = (text * (chars // len(text) + 1))[:chars]  # long contexts cycle the section, as build_messages does
    assert len(SECTIONS[cls].instructions) >= 2  # one prompt is a noisy sample of a class
    for instruction in SECTIONS[cls].instructions:
        user = doc + instruction
        assert content_class(user, user) == cls, instruction


@pytest.mark.parametrize("sub", SUBCLASSES)
@pytest.mark.parametrize("chars", [700, 2500, 9000])
def test_each_subclass_prompt_is_copy_edit_of_its_subclass(sub: str, chars: int) -> None:
    text = class_corpus(sub)
    for instruction in SECTIONS[sub].instructions:
        user = (text * (chars // len(text) + 1))[:chars] + instruction
        assert content_class(user, user) == SUBCLASSES[sub] and edit_kind(user)[0] == sub, instruction
    # copy_edit's own (mixed) section asks for both kinds of change: the sub-class rule calls it additive
    for instruction in SECTIONS["copy_edit"].instructions:
        mixed = (text * (chars // len(text) + 1))[:chars] + instruction
        assert edit_kind(mixed)[0] == "additive"


def test_quick_measures_every_class_at_the_shortest_context_only() -> None:
    plan = plan_for(4096, (PLAIN,), "quick", None)
    assert plan.contexts == (512, 1024, 2048, 3968) and plan.classes == TABLE_CLASSES
    cells = sweep_cells(plan)
    assert cells[:5] == [(None, 512), ("chat", 512), ("code", 512), ("copy_edit", 512), ("structured", 512)]
    assert cells[5:7] == [("near_copy", 512), ("additive", 512)]  # copy_edit's sub-classes, after the classes
    assert cells[7:] == [(None, 1024), (None, 2048), (None, 3968)]  # the budget cuts from the end: long first
    # Two prompts of each class section (the context-only sweep keeps its one), three in a full sweep.
    assert plan.class_prompts == 2 and plan_for(40000, (PLAIN,), "full", None).class_prompts == 3
    corpora = cell_corpora(plan)
    assert corpora[None][1] == (INSTRUCTION,)
    assert corpora["code"][1] == SECTIONS["code"].instructions[:2]


def test_full_measures_classes_at_every_other_context_up_to_three() -> None:
    plan = plan_for(40000, (PLAIN,), "full", None)
    at = sorted({t for c, t in sweep_cells(plan) if c == "code"})
    assert at == [512, 2048, 8192]


def test_your_text_fills_one_class_and_the_context_sweep() -> None:
    mine = "my own words " * 40
    plan = Plan(contexts=(64, 128), candidates=(PLAIN,), gen_tokens=4, repeats=1, budget_s=None, corpus=mine)
    # A plan without class sections still measures the class the text fills (chat by default).
    assert sweep_cells(plan) == [(None, 64), ("chat", 64), (None, 128)]
    corpora = cell_corpora(Plan(**{**plan.__dict__, "corpus_class": "code", "classes": CONTENT_CLASSES}))
    assert corpora[None] == (mine, (INSTRUCTION,)) and corpora["code"] == (mine, SECTIONS["code"].instructions[:1])
    assert corpora["chat"][0] == class_corpus("chat")  # the other classes keep the shipped sections


def test_a_cells_rows_combine_its_prompts_as_a_mix_of_their_tokens_and_time() -> None:
    from app.calibration.runner import combine_prompts
    from app.speculative.settings import SpecSettings

    lookup = SpecSettings("lookup", 8)
    cell = ("near_copy", 512)
    samples = {
        ((cell, 0), PLAIN): [10.0, 10.0],
        ((cell, 1), PLAIN): [20.0, 20.0],
        ((cell, 0), lookup): [30.0, 20.0],  # fast on the first prompt (copying)...
        ((cell, 1), lookup): [10.0],  # ...slow on the second, pruned there after one run: its median stands in
        (((None, 512), 0), lookup): [12.0],
    }
    safe = {k: True for k in samples} | {(((None, 512), 0), lookup): False}
    tokens = {(cell, 0): 60, (cell, 1): 40, ((None, 512), 0): 50}
    combined, ok = combine_prompts(samples, safe, tokens)
    # 100 tokens over 60/10 + 40/20 = 8 s of plain, and over 60/30 + 40/10 (then 60/20 + 40/10) s of lookup
    assert combined[(cell, PLAIN)] == pytest.approx((12.5, 12.5))
    assert combined[(cell, lookup)] == pytest.approx((100 / 6, 100 / 7))
    assert ok[(cell, lookup)] and not ok[((None, 512), lookup)]
    # unsafe on any one prompt is unsafe for the cell; a failed run (no samples) leaves the row without samples
    combined, ok = combine_prompts(samples | {((cell, 1), lookup): []}, safe | {((cell, 1), lookup): False}, tokens)
    assert not ok[(cell, lookup)] and combined[(cell, lookup)] == ()


def test_a_class_sections_further_prompts_come_after_every_context() -> None:
    """A budget that runs short drops a class's second opinion before any context the table covers."""
    from app.calibration.runner import sweep_prompts

    plan = plan_for(4096, (PLAIN,), "quick", None)
    cells = sweep_cells(plan)
    corpora = cell_corpora(plan)
    prompts = sweep_prompts(cells, {c: len(corpora[c[0]][1]) for c in cells})
    assert prompts[: len(cells)] == [(c, 0) for c in cells]
    assert prompts[len(cells) :] == [((c, 512), 1) for c in TABLE_CLASSES]
