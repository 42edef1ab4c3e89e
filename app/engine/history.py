"""A chat longer than the context window: its oldest turns left out, at a cut kept stable while the rest still fits."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.engine.types import ContextLengthExceeded, DoneEvent, Event, GenerationRequest, InvalidRequest

Templated = Callable[[GenerationRequest], tuple[list[int], str]]

# A new cut leaves the prompt at most this share of the room the reply leaves it. llama-server's context shift and
# Ollama's both discard half of what they may discard, for the same reason: a cut that leaves out only what the next
# turn needs moves again on every turn, its prompt no longer starts as the last one did, and the whole window is
# prefilled again each time (14-20 s for 1,800 tokens on a 2-core CPU); a cut that frees half the room holds for
# many turns, each of which reuses the cached window (bench/context/bench_rolling_window.py measures both).
KEEP_SHARE = 0.5


@dataclass
class RollingWindow:
    """Where each long chat's kept turns start, remembered so that its next turns start there too while they fit.

    Whole turns are left out, a user message and everything that answered it at a time, keeping the leading system
    messages and the newest turn (LM Studio's rolling window; Ollama keeps the system prompt the same way), so the
    rest still starts with a user message, as templates that check the roles' alternation require. A chat is known
    by what its cut leaves out (a digest of those messages), so an edited old message or another chat finds no cut.
    """

    keep_share: float = KEEP_SHARE  # 1.0: leave out the fewest turns each time (the cut moves on every turn)
    remembered: int = 32  # chats whose cut is kept (LRU); each costs a digest and an index
    _cuts: OrderedDict[bytes, None] = field(default_factory=OrderedDict)

    def fit(
        self, request: GenerationRequest, templated: Templated, n_ctx: int
    ) -> tuple[GenerationRequest, list[int], str, int]:
        """(request, its prompt tokens, the prompt text, how many messages were left out) for `context_overflow`.

        "drop_oldest" on a chat whose prompt and reply do not fit the window: its remembered cut if the rest still
        fits, else a new cut whose prompt takes at most `keep_share` of the room the reply leaves (the fewest turns
        that fit where even the newest turn alone takes more). Otherwise, or when even the newest turn does not
        fit, the request as it came: check_prompt_fits then refuses it and says why.
        """
        prompt, text = templated(request)
        messages = request.messages
        if request.context_overflow != "drop_oldest" or messages is None or _fits(len(prompt), request, n_ctx):
            return request, prompt, text, 0
        head = 0
        while head < len(messages) and messages[head].get("role") == "system":
            head += 1
        # where the rest may start: at a user message after the system messages and the first turn
        cuts = [i for i in range(head + 1, len(messages)) if messages[i].get("role") == "user"]
        if not cuts:
            return request, prompt, text, 0
        digests = _prefix_digests(messages, cuts)
        tried: dict[int, tuple[GenerationRequest, list[int], str]] = {}

        def kept_from(k: int) -> tuple[GenerationRequest, list[int], str]:
            if k not in tried:
                shorter = replace(request, messages=messages[:head] + messages[cuts[k] :])
                tried[k] = (shorter, *templated(shorter))
            return tried[k]

        def fits_from(k: int) -> bool:
            shorter, tokens, _ = kept_from(k)
            return _fits(len(tokens), shorter, n_ctx)

        def fits_share(k: int) -> bool:
            shorter, tokens, _ = kept_from(k)
            room = n_ctx if shorter.until_context_end else n_ctx - shorter.max_tokens
            return len(tokens) <= self.keep_share * room and _fits(len(tokens), shorter, n_ctx)

        known = [k for k, d in enumerate(digests) if d in self._cuts]
        start = known[-1] if known else 0  # a cut only moves on: the turns it left out stay out
        if known and fits_from(start):
            chosen = start
        elif not fits_from(len(cuts) - 1):
            return request, prompt, text, 0
        else:
            test = fits_share if fits_share(len(cuts) - 1) else fits_from
            chosen = _first(test, start, len(cuts) - 1)
        self._remember(digests[chosen])
        shorter, tokens, shorter_text = kept_from(chosen)
        return shorter, tokens, shorter_text, cuts[chosen] - head

    def _remember(self, digest: bytes) -> None:
        self._cuts[digest] = None
        self._cuts.move_to_end(digest)
        while len(self._cuts) > self.remembered:
            self._cuts.popitem(last=False)


def _first(test: Callable[[int], bool], lo: int, hi: int) -> int:
    """The first k in [lo, hi] that passes a test that every later k passes too (hi does): a bisection, so a long
    chat is templated and tokenized a few times, not once per turn (leaving out more never lengthens the prompt)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if test(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def _prefix_digests(messages: Sequence[dict[str, Any]], cuts: Sequence[int]) -> list[bytes]:
    """For each cut, a digest of the messages before it: what that cut leaves out, system messages included."""
    h = hashlib.blake2b(digest_size=16)
    out: list[bytes] = []
    done = 0
    for c in cuts:
        for m in messages[done:c]:
            h.update(json.dumps(m, sort_keys=True, default=str).encode())
        done = c
        out.append(h.copy().digest())
    return out


def saying_dropped(events: Iterator[Event], dropped: int) -> Iterator[Event]:
    """The events, the DoneEvent's summary saying how many messages were left out."""
    for ev in events:
        yield DoneEvent(replace(ev.summary, dropped_messages=dropped)) if dropped and isinstance(ev, DoneEvent) else ev


def check_prompt_fits(n_prompt: int, max_tokens: int, n_ctx: int, until_context_end: bool = False) -> int:
    """The max_tokens to run with; refuses an empty prompt, or one whose generation could not fit the context window.

    With `until_context_end`, max_tokens shrinks to the room the prompt leaves (refused only when it leaves none).
    """
    if n_prompt == 0:
        raise InvalidRequest("the prompt is empty after tokenization")
    if until_context_end:
        room = n_ctx - n_prompt
        if room < 1:
            raise ContextLengthExceeded(f"the prompt ({n_prompt} tokens) fills the context window of {n_ctx} tokens")
        return min(max_tokens, room)
    if n_prompt + max_tokens > n_ctx:
        raise ContextLengthExceeded(
            f"prompt ({n_prompt} tokens) + max_tokens ({max_tokens}) exceeds the context window of {n_ctx} tokens"
        )
    return max_tokens


def _fits(n_prompt: int, request: GenerationRequest, n_ctx: int) -> bool:
    """Whether check_prompt_fits accepts this prompt for this request (its rule, not a copy of it)."""
    try:
        check_prompt_fits(n_prompt, request.max_tokens, n_ctx, request.until_context_end)
    except ContextLengthExceeded:
        return False
    return True
