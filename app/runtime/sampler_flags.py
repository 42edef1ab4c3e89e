"""llama-cli's sampler flags: each one's spelling, default and the sampling field it sets (generate and serve)."""

from __future__ import annotations

import argparse
from typing import Any

# (flag, type, llama-cli's default, the field it sets: SamplingParams' and llama-server's request field, help)
FLAGS: tuple[tuple[str, type, Any, str, str], ...] = (
    ("--temperature", float, 0.8, "temperature", "0 for greedy"),
    ("--top-k", int, 40, "top_k", "0: off"),
    ("--top-p", float, 0.95, "top_p", "1: off"),
    ("--min-p", float, 0.05, "min_p", "0: off"),
    ("--repeat-penalty", float, 1.0, "repeat_penalty", "1: off"),
    ("--repeat-last-n", int, 64, "repeat_last_n", "tokens the penalties look back at"),
    ("--presence-penalty", float, 0.0, "presence_penalty", "0: off"),
    ("--frequency-penalty", float, 0.0, "frequency_penalty", "0: off"),
    ("--typical", float, 1.0, "typical_p", "locally typical sampling, 1: off"),
    ("--top-nsigma", float, -1.0, "top_n_sigma", "top-n-sigma sampling, -1: off"),
    ("--xtc-probability", float, 0.0, "xtc_probability", "XTC: how often it cuts, 0: off"),
    ("--xtc-threshold", float, 0.1, "xtc_threshold", "XTC's threshold"),
    ("--dynatemp-range", float, 0.0, "dynatemp_range", "dynamic temperature, 0: off"),
    ("--dynatemp-exp", float, 1.0, "dynatemp_exponent", "its exponent"),
    ("--dry-multiplier", float, 0.0, "dry_multiplier", "DRY repetition penalty, 0: off"),
    ("--dry-base", float, 1.75, "dry_base", "DRY's base"),
    ("--dry-allowed-length", int, 2, "dry_allowed_length", "repeats DRY lets pass"),
    ("--dry-penalty-last-n", int, 64, "dry_penalty_last_n", "tokens DRY scans"),
    ("--mirostat", int, 0, "mirostat", "mirostat 1 or 2, 0: off"),
    ("--mirostat-lr", float, 0.1, "mirostat_eta", "mirostat's learning rate eta"),
    ("--mirostat-ent", float, 5.0, "mirostat_tau", "mirostat's target entropy tau"),
    ("--min-keep", int, 0, "min_keep", "the fewest tokens top-p, min-p, typical and XTC leave, 0: no minimum"),
)
BREAKER_FLAG = "--dry-sequence-breaker"


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def add(p: argparse.ArgumentParser, title: str, with_defaults: bool) -> None:
    """The flags as one argument group; without defaults an unset flag stays None (serve: the request decides)."""
    g = p.add_argument_group(title)
    for flag, kind, default, _, text in FLAGS:
        g.add_argument(
            flag,
            type=kind,
            default=default if with_defaults else None,
            metavar="N",
            help=f"{text} (llama-cli's default: {default})",
        )
    g.add_argument(
        BREAKER_FLAG,
        action="append",
        metavar="STRING",
        help="a DRY sequence breaker (repeatable; replaces the defaults \\n : \" *; 'none' for none)",
    )


def fields(args: argparse.Namespace) -> dict[str, Any]:
    """The fields the flags set, by SamplingParams' (and llama-server's) names; unset flags are left out."""
    out = {field: getattr(args, _dest(flag), None) for flag, _, _, field, _ in FLAGS}
    return {k: v for k, v in out.items() if v is not None}


def breakers(args: argparse.Namespace) -> tuple[str, ...] | None:
    """--dry-sequence-breaker as llama-cli reads it: None unless given; 'none' among them clears them all."""
    given: list[str] | None = getattr(args, _dest(BREAKER_FLAG), None)
    if given is None:
        return None
    return () if "none" in given else tuple(given)
