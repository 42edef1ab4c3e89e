"""This process's resident memory, as the app's status bar shows it (a model's weights and contexts live here)."""

from __future__ import annotations

import os


def resident_bytes() -> int | None:
    """Resident set size of this process in bytes (Linux /proc; None where it cannot be read)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def describe(n: int | None) -> str:
    """ "RAM 1.23 GB" (decimal units, as system monitors show), or "" when unknown."""
    return "" if n is None else f"RAM {n / 1e9:.2f} GB"
