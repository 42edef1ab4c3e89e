"""Which kind of copy-edit a request is, from its instruction's wording: a near copy of its block, or an additive edit.

Why: inside copy_edit the best draft source splits by how much of the answer the prompt already holds. Measured on
the recorded Qwen2.5-Coder traces (bench/results/archive/2026-12-01-classes-cpu-v2.md, H200 SIMULATED): prompt lookup
wins the near copies (rename a function, reorder a module: ~102 tok/s at 8k vs ~90-94 for the draft model), and
the draft model wins the edits that write new text (add a parameter, fix a bug: n2 ~78-84 vs lookup 59-67). No
single copy_edit row catches both, so Dynamic Draft keeps a frontier per sub-class (``NEAR_COPY``, ``ADDITIVE``),
each with its own calibration prompt, falling back to copy_edit's rows, then the context-only rows.

How (a pure function on a few hundred characters; no model call; bench/dynamic_draft/bench_policy.py prints its cost):

1. Find the instruction. An edit request is a block plus a one-line instruction before or after it (the same
   "set apart" layout the class detector reads). So only the first and the last non-empty line of the last user
   turn are read, with fenced code cut out, and a line that reads as code (indented, or dense in code
   punctuation) is skipped: the block's own edge lines ("def load(path):", "    return total") carry words such as
   ``add`` or ``sort`` as identifiers, not as instructions. A line is read up to ``LINE_CHARS``. When both edge
   lines are prose (a document and its instruction), the one worded as an edit (the class detector's rule, e.g.
   "fix the spelling", "return the full text") is the instruction, so the document's own "we will add ..." is
   not read; if that does not single one out, both are read.
2. Read its words. Words that ask for text the block lacks (``add``, ``docstring``, ``implement``, ``bug``,
   ``translate`` ...) make it ``additive``: wherever new text lands, the draft model predicts it and lookup has
   nothing to copy, and one such ask among near-copy ones ("rename X and add docstrings") already cuts lookup's
   runs short. Else words that keep the text and move or retouch it (``rename``, ``typo``, ``reorder``,
   ``reformat``, ``remove``, ``verbatim`` ...) make it ``near_copy``. Else no sub-class: copy_edit's own rows
   decide, as before. Words that can go either way ("change", "convert", "refactor", "fix" alone, "error") are in
   neither list: a wrong sub-class costs more than none.

A retrieval request (the class detector's quote cue: "quote ... verbatim", "extract the lines") is ``near_copy``
whatever its words: its answer is cut out of the prompt. The cue ("additive:add", "near_copy:rename",
"near_copy:quote_instruction") says which word decided, for the decision record.
"""

from __future__ import annotations

from typing import Final

from app.policy.content_class import (
    ADDITIVE,
    CODE_DENSITY,
    COPY_EDIT,
    NEAR_COPY,
    WINDOW_CHARS,
    RequestClass,
    asks_for_edit,
    classify,
    code_density,
    words_of,
)

LINE_CHARS = 300
"""Characters read of each edge line; an instruction is a sentence or two, a longer line is the block's prose."""

_ADD_WORDS: Final = frozenset(
    [
        "add",
        "adds",
        "adding",
        "insert",
        "docstring",
        "docstrings",
        "jsdoc",
        "javadoc",
        "annotate",
        "annotations",
        "implement",
        "extend",
        "support",
        "handle",
        "bug",
        "bugs",
        "off-by-one",
        "optimize",
        "optimise",
        "translate",
        "rewrite",
        "expand",
        "elaborate",
        "improve",
        "paraphrase",
    ]
)
_NEAR_WORDS: Final = frozenset(
    [
        "rename",
        "renaming",
        "typo",
        "typos",
        "spelling",
        "misspellings",
        "misspelled",
        "grammar",
        "punctuation",
        "proofread",
        "capitalization",
        "reformat",
        "format",
        "indentation",
        "indent",
        "whitespace",
        "reorder",
        "re-order",
        "sort",
        "alphabetize",
        "move",
        "swap",
        "replace",
        "remove",
        "delete",
        "verbatim",
        "quote",
        "extract",
    ]
)


def _reads_as_code(line: str) -> bool:
    if line[:1] in (" ", "\t"):
        return True
    return code_density(line) > CODE_DENSITY * 2


def _edge_lines(body: str) -> list[str]:
    """The first and last non-empty lines of `body` outside code fences (bounded windows only)."""
    head, tail = body[:WINDOW_CHARS], body[-WINDOW_CHARS:]
    if "```" in head:
        head = head.split("```", 1)[0]  # the instruction before the first fence, if any
    if "```" in tail:
        tail = tail.rsplit("```", 1)[1]  # the instruction after the last fence, if any
    lines = []
    for part, first in ((head, True), (tail, False)):
        rows = [r for r in part.split("\n") if r.strip()]
        if rows:
            line = rows[0] if first else rows[-1]
            if not _reads_as_code(line):
                lines.append(line[:LINE_CHARS])
    return lines


def edit_kind(focus: str) -> tuple[str | None, str | None]:
    """(sub-class, cue) of a copy_edit request from its instruction text `focus` (the last user turn, or the raw
    prompt): NEAR_COPY, ADDITIVE, or (None, None) when its wording says neither (module docstring)."""
    lines = [line.lower() for line in _edge_lines(focus)]
    if len(lines) == 2:
        # Two prose edge lines (an instruction, and the block's first or last paragraph): the one that words an
        # edit as the class detector does is the instruction; only when that does not tell them apart, read both.
        asking = [line for line in lines if asks_for_edit(line, words_of(line))]
        lines = asking if len(asking) == 1 else lines
    words: set[str] = set()
    for line in lines:
        words.update(words_of(line))  # "`average`", "bug:", "(main" -> plain words
    add = _ADD_WORDS.intersection(words)
    if add:
        return ADDITIVE, f"{ADDITIVE}:{min(add)}"
    near = _NEAR_WORDS.intersection(words)
    if near:
        return NEAR_COPY, f"{NEAR_COPY}:{min(near)}"
    return None, None


def classify_request(text: str, focus: str | None = None, structured_request: bool = False) -> RequestClass:
    """The class and cue of a prompt (app.policy.content_class.classify, same arguments) and, for copy_edit, its
    sub-class and cue from the instruction's wording; what Dynamic Draft decides on, once per request."""
    cls, cue = classify(text, focus, structured_request)
    if cls != COPY_EDIT:
        return RequestClass(cls, cue)
    if cue == "quote_instruction":  # retrieval: the answer is cut out of the prompt, a copy by definition
        return RequestClass(cls, cue, NEAR_COPY, f"{NEAR_COPY}:{cue}")
    sub, sub_cue = edit_kind(text if focus is None else focus)
    return RequestClass(cls, cue, sub, sub_cue)
