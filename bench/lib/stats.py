"""Figures the benchmarks compute alike."""

from __future__ import annotations


def mix(items: list[tuple[int, float]]) -> float:
    """tok/s of a set of runs taken together: total tokens / total time."""
    tokens = sum(n for n, _ in items)
    ms = sum(t for _, t in items)
    return tokens / ms * 1000.0 if ms else 0.0
