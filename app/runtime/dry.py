"""DRY ("don't repeat yourself") penalties: llama.cpp's DRY sampler as pure functions over the token history.

A token that would extend a repeat of an earlier stretch of the history by more than `allowed_length` tokens loses
`multiplier * base ** (repeat length - allowed_length)` from its logit. Sequence breakers (by default a newline, a
colon, a quote and an asterisk, llama.cpp's) end the stretch a repeat may span, so formatting that recurs by nature
(dialogue lines, lists) is not penalised. The rules are llama.cpp's (`llama-sampler.cpp`, from koboldcpp), so a
request means what it means there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

DEFAULT_BREAKERS = ("\n", ":", '"', "*")
MAX_BREAKERS = 32  # each one is a pass over the vocabulary when a request's breakers are resolved
MAX_BREAKER_BYTES = 40  # llama.cpp's MAX_CHAR_LEN (it truncates; DynaDraft refuses, so nothing is cut silently)
MAX_TAIL_TOKENS = 20  # llama.cpp's MAX_SEQ_LEN: a breaker's tokens after its first, which bounds the scan
# exp(88.72) is the largest float32: llama.cpp clamps the exponent so base ** exponent stays finite.
_FLOAT_MAX_LOG = 88.7228391


@dataclass(frozen=True, eq=False)
class Breakers:
    """Sequence breakers resolved against one vocabulary: for each head token, the token tails that complete a
    breaker after it (an empty tail: the head alone is a breaker, i.e. its text contains one)."""

    tails: Mapping[int, tuple[tuple[int, ...], ...]]

    def is_single(self, token: int) -> bool:
        return () in self.tails.get(token, ())


def check_breakers(breakers: Sequence[str]) -> None:
    """A request's dry_sequence_breakers: up to MAX_BREAKERS non-empty strings of at most MAX_BREAKER_BYTES bytes
    (none: repeats may span anything, as llama-cli's --dry-sequence-breaker none)."""
    if len(breakers) > MAX_BREAKERS:
        raise ValueError(f"dry_sequence_breakers: at most {MAX_BREAKERS} strings, got {len(breakers)}")
    for b in breakers:
        if not isinstance(b, str) or not b or len(b.encode("utf-8")) > MAX_BREAKER_BYTES:
            raise ValueError(f"dry_sequence_breakers: each is a non-empty string of at most {MAX_BREAKER_BYTES} bytes")


def resolve_breakers(
    breakers: Sequence[str], pieces: Sequence[bytes], tokenize: Callable[[str], list[int]]
) -> Breakers:
    """The breakers as token sequences, as llama.cpp finds them: a token whose text contains a breaker is a breaker
    by itself; a token whose text ends with the start of a breaker heads it, the rest tokenized as its tail."""
    tails: dict[int, set[tuple[int, ...]]] = {}
    for breaker in breakers:
        b = breaker.encode("utf-8")
        for token, word in enumerate(pieces):
            if b in word:
                tails.setdefault(token, set()).add(())
                continue
            for k in range(1, min(len(b), len(word) + 1)):
                if word.endswith(b[:k]):  # the breaker starts in this token's last k bytes and runs on past it
                    rest = tokenize(b[k:].decode("utf-8", "ignore"))[:MAX_TAIL_TOKENS]
                    if rest:  # empty only where the rest is a cut UTF-8 character: no tail to match
                        tails.setdefault(token, set()).add(tuple(rest))
    return Breakers({t: tuple(sorted(s)) for t, s in tails.items()})


def penalties(
    history: Sequence[int],
    multiplier: float,
    base: float,
    allowed_length: int,
    last_n: int,
    breakers: Breakers | None,
) -> dict[int, float]:
    """What DRY subtracts from each token's logit after `history` (the prompt and the output so far), over its last
    `last_n` tokens (-1: all of it). Empty when DRY is off or nothing repeats."""
    if multiplier == 0.0 or base < 1.0 or last_n == 0:
        return {}
    n = len(history) if last_n < 0 else min(len(history), last_n)
    if n <= allowed_length:
        return {}
    rev = list(reversed(history[len(history) - n :]))  # rev[i]: the token i places before the end
    limit = _repeat_limit(rev, breakers)
    if limit < allowed_length:
        return {}
    # z[k]: how many tokens the stretch ending k tokens before the end shares with the history's own end, so the
    # token that followed that stretch (rev[k - 1]) would extend a repeat of that length.
    z = _z_array(rev)
    longest: dict[int, int] = {}
    for k in range(1, n):
        length = min(z[k], limit)
        if length >= allowed_length and longest.get(rev[k - 1], -1) < length:
            longest[rev[k - 1]] = length
    max_exponent = int(_FLOAT_MAX_LOG / math.log(base)) if base > 1.000001 else 0
    out: dict[int, float] = {}
    for token, length in longest.items():
        if breakers is not None and breakers.is_single(token):
            continue  # emitting a breaker ends the repeat rather than extending it
        exponent = length - allowed_length
        if max_exponent > 0:
            exponent = min(exponent, max_exponent)
        out[token] = multiplier * base**exponent
    return out


def _repeat_limit(rev: list[int], breakers: Breakers | None) -> int:
    """How far back a repeat may reach: up to the most recent complete breaker (its length excluded)."""
    if breakers is None:
        return len(rev)
    for i, token in enumerate(rev):
        tails = breakers.tails.get(token)
        if tails is None:
            continue
        # A breaker's tail was emitted after its head, so it sits nearer the end: rev[i - 1], rev[i - 2], ...
        match = max(
            (len(t) for t in tails if len(t) <= i and all(t[o] == rev[i - o - 1] for o in range(len(t)))), default=-1
        )
        if match >= 0:
            return i - match
    return len(rev)


def _z_array(s: list[int]) -> list[int]:
    """z[k] = the length of the longest common prefix of s and s[k:] (z[0] = 0), in linear time."""
    n = len(s)
    z = [0] * n
    left = right = 0
    for k in range(1, n):
        if k < right:
            z[k] = min(right - k, z[k - left])
        while k + z[k] < n and s[z[k]] == s[k + z[k]]:
            z[k] += 1
        if k + z[k] > right:
            left, right = k, k + z[k]
    return z
