"""The calibration corpus per content class: which shipped text each class cuts prompts from, and its instruction."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from app.policy.content_class import ADDITIVE, CHAT, CODE, COPY_EDIT, NEAR_COPY, STRUCTURED, TABLE_CLASSES

GENERAL_INSTRUCTION = "\n\nSummarise the document above in a few detailed paragraphs, then list its main points."
"""The context-only sweep's instruction (and chat's): fresh prose about the document."""


@dataclass(frozen=True)
class Section:
    """One class's calibration prompts: a shipped text (repeated to reach long prompts) and the instruction after it.

    The instruction makes the model produce that class's kind of output from the text: fresh prose (chat), fresh
    code about the code (code), the text handed back with a small change (copy_edit), JSON extracted from it
    (structured). Each is generic, so it also fits a user's own text (`calibrate --corpus FILE --corpus-class C`).
    """

    content_class: str
    files: tuple[str, ...]
    instruction: str


SECTIONS: dict[str, Section] = {
    CHAT: Section(CHAT, ("prose.txt",), GENERAL_INSTRUCTION),
    CODE: Section(
        CODE,
        ("code.txt",),
        "\n\nWrite pytest unit tests for the code above: one test function per behaviour, with short comments.",
    ),
    COPY_EDIT: Section(
        COPY_EDIT,
        ("copy_edit.txt",),
        '\n\nEdit the text above and return the whole edited text, nothing else: rename "job" to "task" '
        "everywhere (names and prose alike), give every function a one-line docstring, fix any bugs and spelling "
        "mistakes, and keep everything else as it is.",
    ),
    STRUCTURED: Section(
        STRUCTURED,
        ("structured.txt",),
        "\n\nExtract every person, place and date mentioned above and return them as a JSON object with the keys "
        '"people", "places" and "dates" (lists of strings). Respond with JSON only.',
    ),
    # copy_edit's sub-classes (app.policy.edit_kind): the same text, one instruction that only retouches it (the
    # answer is the text again, near verbatim) and one that writes new text into it (docstrings, type hints).
    NEAR_COPY: Section(
        NEAR_COPY,
        ("copy_edit.txt",),
        "\n\nEdit the text above and return the whole edited text, nothing else: rename the method `run_job` to "
        "`run_one`, correct the spelling mistakes, and keep everything else exactly as it is.",
    ),
    ADDITIVE: Section(
        ADDITIVE,
        ("copy_edit.txt",),
        "\n\nEdit the code above and return the whole updated code, nothing else: add type hints to every "
        "function, add a `timeout` parameter (in seconds, default None) that is passed on to every call that can "
        "block, and fix the bugs the text lists.",
    ),
}
assert tuple(SECTIONS) == TABLE_CLASSES


def read_corpus(*names: str) -> str:
    """Shipped corpus files, joined with a blank line."""
    root = resources.files("app.calibration") / "corpus"
    return "\n\n".join((root / name).read_text(encoding="utf-8") for name in names)


def general_corpus() -> str:
    """The context-only sweep's text: prose and code, joined so one document mixes both (like real chats)."""
    return read_corpus("prose.txt", "code.txt")


def class_corpus(content_class: str) -> str:
    """The shipped text of one class's section."""
    return read_corpus(*SECTIONS[content_class].files)
