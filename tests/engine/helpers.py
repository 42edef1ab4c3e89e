"""Shared by the catch-up tests (engine, CLI, window): a long new text, and a table where only the catch-up decides."""

from __future__ import annotations

from app.policy import FrontierRow
from app.speculative.settings import PLAIN, SpecSettings

DRAFT = SpecSettings("draft", 4)
LOOKUP = SpecSettings("lookup", 4)


def long_text(topic: str) -> str:
    """About 250 tokens the draft's KV has not seen (a new document in a first turn)."""
    return " ".join(f"Note {i} on {topic}: the {topic} changes with the season and the weather." for i in range(15))


def draft_wins_narrowly() -> list[FrontierRow]:
    """Rows (not measured: written for the tests) in which the draft model wins narrowly at every length and lookup
    is the best without it: whether the draft runs then turns on its catch-up alone."""
    return [
        FrontierRow(0, 4096, setting, tps, 0.5, 3, True, prompt_tokens=600)
        for setting, tps in ((PLAIN, 40.0), (LOOKUP, 45.0), (DRAFT, 48.0))
    ]
