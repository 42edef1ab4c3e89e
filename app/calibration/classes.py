"""The calibration corpus per content class: which shipped text each class cuts prompts from, and its instruction."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from app.policy.content_class import ADDITIVE, CHAT, CODE, COPY_EDIT, NEAR_COPY, STRUCTURED, TABLE_CLASSES

GENERAL_INSTRUCTION = "\n\nSummarise the document above in a few detailed paragraphs, then list its main points."
"""The context-only sweep's instruction (and chat's): fresh prose about the document."""


@dataclass(frozen=True)
class Section:
    """One class's calibration prompts: a shipped text (repeated to reach long prompts) and the instructions after it.

    Each instruction makes the model produce that class's kind of output from the text: fresh prose (chat), fresh
    code about the code (code), the text handed back with a small change (copy_edit), JSON extracted from it
    (structured). Each is generic, so it also fits a user's own text (`calibrate --corpus FILE --corpus-class C`).
    There are several per class because one prompt is a noisy sample of a class: on the simulated class workload
    the fastest setting on a class's one calibration prompt was often not the fastest on other prompts of the class.
    The prompts of a section share its text, so the prefix cache prefills only the instruction when they alternate.
    """

    content_class: str
    files: tuple[str, ...]
    instructions: tuple[str, ...]

    @property
    def instruction(self) -> str:
        """The section's first prompt's instruction (the only one before sections had several)."""
        return self.instructions[0]


SECTIONS: dict[str, Section] = {
    CHAT: Section(
        CHAT,
        ("prose.txt",),
        (
            GENERAL_INSTRUCTION,
            "\n\nWrite a short reply to the author of the text above: what you agree with, what you doubt, and why.",
            "\n\nExplain the text above to someone new to the subject, with one everyday example.",
        ),
    ),
    CODE: Section(
        CODE,
        ("code.txt",),
        (
            "\n\nWrite pytest unit tests for the code above: one test function per behaviour, with short comments.",
            "\n\nWrite a command-line entry point for the code above (argparse) that exposes its main functions.",
            "\n\nExplain what the code above does, then write a faster version of its slowest function.",
        ),
    ),
    COPY_EDIT: Section(
        COPY_EDIT,
        ("copy_edit.txt",),
        (
            '\n\nEdit the text above and return the whole edited text, nothing else: rename "job" to "task" '
            "everywhere (names and prose alike), give every function a one-line docstring, fix any bugs and spelling "
            "mistakes, and keep everything else as it is.",
            "\n\nEdit the text above and return the whole edited text, nothing else: rename the class to "
            "`TaskRunner`, add a docstring to the class and its methods, and keep everything else as it is.",
        ),
    ),
    STRUCTURED: Section(
        STRUCTURED,
        ("structured.txt",),
        (
            "\n\nExtract every person, place and date mentioned above and return them as a JSON object with the "
            'keys "people", "places" and "dates" (lists of strings). Respond with JSON only.',
            "\n\nList every decision and task in the text above as a JSON array of objects with the keys "
            '"what", "who" and "when" (null when not said). Respond with JSON only.',
            "\n\nReturn every amount of money in the text above as a JSON array of objects with the keys "
            '"amount", "currency" and "purpose". Respond with JSON only.',
        ),
    ),
    # copy_edit's sub-classes (app.policy.edit_kind): the same text, instructions that only retouch it (the answer
    # is the text again, near verbatim) and instructions that write new text into it (docstrings, type hints).
    NEAR_COPY: Section(
        NEAR_COPY,
        ("copy_edit.txt",),
        (
            "\n\nEdit the text above and return the whole edited text, nothing else: rename the method `run_job` "
            "to `run_one`, correct the spelling mistakes, and keep everything else exactly as it is.",
            "\n\nEdit the text above and return the whole edited text, nothing else: rename the variable `exc` to "
            "`error` and keep everything else exactly as it is.",
        ),
    ),
    ADDITIVE: Section(
        ADDITIVE,
        ("copy_edit.txt",),
        (
            "\n\nEdit the code above and return the whole updated code, nothing else: add type hints to every "
            "function, add a `timeout` parameter (in seconds, default None) that is passed on to every call that "
            "can block, and fix the bugs the text lists.",
            "\n\nEdit the code above and return the whole updated code, nothing else: add a module logger and log "
            "one debug line at the start of every method.",
        ),
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
