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

import numpy as np

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
    max_exponent = int(_FLOAT_MAX_LOG / math.log(base)) if base > 1.000001 else 0
    # Past allowed_length + max_exponent every repeat gets the same (clamped) penalty: no need to measure further.
    cap = limit if max_exponent == 0 else min(limit, allowed_length + max_exponent)
    out: dict[int, float] = {}
    for token, length in _longest_repeats(np.asarray(rev, dtype=np.int64), cap, allowed_length).items():
        if breakers is not None and breakers.is_single(token):
            continue  # emitting a breaker ends the repeat rather than extending it
        exponent = length - allowed_length
        if max_exponent > 0:
            exponent = min(exponent, max_exponent)
        out[token] = multiplier * base**exponent
    return out


def _longest_repeats(rev: np.ndarray, cap: int, allowed_length: int) -> dict[int, int]:
    """For each token that would extend a repeat of at least `allowed_length`, that repeat's length (at most `cap`).

    The stretch ending k tokens before the end repeats the history's own end for z[k] tokens (the longest common
    prefix of rev and rev[k:]); the token that followed it, rev[k - 1], would extend that repeat. Measured for all k
    at once, one token further per pass, over the k still matching: a linear scan in numpy (llama.cpp runs a
    Z-algorithm in C; in Python that took 8 ms a row over a 32k-token window)."""
    n = rev.shape[0]
    ks = np.flatnonzero(rev[1:] == rev[0]) + 1  # z[k] >= 1
    found_k: list[np.ndarray] = []
    found_len: list[np.ndarray] = []
    if allowed_length == 0:  # then every token that followed anything extends a "repeat" of 0
        found_k.append(np.arange(1, n))
        found_len.append(np.zeros(n - 1, dtype=np.int64))
    length = 1
    while ks.shape[0] and length < cap:
        inside = ks + length < n
        same = np.zeros(ks.shape[0], dtype=bool)
        same[inside] = rev[ks[inside] + length] == rev[length]
        if length >= allowed_length:
            found_k.append(ks[~same])
            found_len.append(np.full(int((~same).sum()), length))
        ks = ks[same]
        length += 1
    if length >= allowed_length:
        found_k.append(ks)
        found_len.append(np.full(ks.shape[0], length))
    out: dict[int, int] = {}
    if found_k:
        tokens = rev[np.concatenate(found_k) - 1]
        for token, length_ in zip(tokens.tolist(), np.concatenate(found_len).tolist(), strict=True):
            if out.get(token, -1) < length_:
                out[token] = length_
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
