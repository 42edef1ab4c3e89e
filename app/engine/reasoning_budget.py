"""A token budget for the model's reasoning block (<think>..</think>), as llama-server's --reasoning-budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.engine import chat_format
from app.runtime.llama import Vocab

THINK_OPEN = chat_format.THINK_OPEN.encode()  # the tags as the tokens' bytes carry them
THINK_CLOSE = chat_format.THINK_CLOSE.encode()
# What a forced end commits after the message: the shape Qwen3-style templates give it.
CLOSING = f"\n{chat_format.THINK_CLOSE}\n\n"
MAX_MESSAGE_CHARS = 2000


def _utf8_complete(data: bytes) -> bool:
    """Whether `data` does not end inside a multi-byte UTF-8 character (a forced end must not split one)."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 != 0x80:  # a lead byte (or ASCII): how long its character is says whether it is whole
            need = 1 if b < 0x80 else 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else 4 if b >> 3 == 0b11110 else 1
            return back >= need
    return True  # only continuation bytes: nothing to wait for


@dataclass
class ReasoningBudget:
    """Counts the tokens a reply spends inside its reasoning block and says when the budget is spent.

    The tags are found in the tokens' bytes (control tokens rendered), so a single <think> token (Qwen3) and a tag
    spelt over several tokens count alike. Where llama-server's sampler forces the end token by token, the engine
    commits the whole forced sequence in one batch (Session._forced_step): under speculation a draft may run past
    the budget, and `admit` says how many of a step's tokens stay.
    """

    budget: int  # tokens allowed inside the block; 0 ends it as soon as it opens
    forced: tuple[int, ...]  # committed when the budget is spent: the message, then the closing tag
    thinking: bool = False  # inside an open block
    done: bool = False  # the block ended (by itself or forced): nothing more is counted
    used: int = 0  # tokens committed inside the block
    was_forced: bool = False
    grammar_refused: bool = False  # the request's grammar does not admit the forced end: the block ends by itself
    _head: bytes = b""  # the output's bytes before the block opened (to find an opening tag across tokens)
    _body: bytearray = field(default_factory=bytearray)  # the block's bytes so far (to find the closing tag)

    def due(self) -> bool:
        """The budget is spent and the block still open: the forced sequence comes next."""
        return self.thinking and not self.done and self.used >= self.budget and _utf8_complete(bytes(self._body))

    def admit(self, pieces: Sequence[bytes]) -> int:
        """How many of these next tokens (their bytes, in order) are committed before the forced end is due; the
        state follows the admitted ones."""
        for i, piece in enumerate(pieces):
            if self.due():
                return i
            if self.done:
                continue
            if not self.thinking:
                self._head = (self._head + piece)[-64:]
                if THINK_OPEN in self._head:
                    self.thinking = True
                    self._body = bytearray(self._head.split(THINK_OPEN, 1)[1])
                continue
            self.used += 1
            self._body += piece
            if THINK_CLOSE in self._body[-(len(piece) + len(THINK_CLOSE)) :]:
                self.done = True
        return len(pieces)

    def force(self) -> tuple[int, ...]:
        """The forced sequence, once: the block then counts as ended."""
        self.done = self.was_forced = True
        return self.forced

    def report(self) -> dict[str, Any]:
        """What the response says ran: the budget, the tokens the block used, whether its end was forced."""
        out: dict[str, Any] = {"budget_tokens": self.budget, "reasoning_tokens": self.used, "forced": self.was_forced}
        if self.grammar_refused:
            out |= {"forced": False, "note": "the request's grammar does not admit the forced end"}
        return out


def build_budget(budget: int | None, message: str, prompt_tail: bytes, tokenize: Any) -> ReasoningBudget | None:
    """A budget for one request (None: unlimited); `prompt_tail`: the prompt's last bytes, in which a template
    that opens the block itself (".. assistant\\n<think>\\n") leaves it open; `tokenize(text)` gives the forced
    tokens (control tokens parsed, so Qwen3's </think> is its one token)."""
    if budget is None or budget < 0:
        return None
    start = prompt_tail.rfind(THINK_OPEN)
    opened = start != -1 and start > prompt_tail.rfind(THINK_CLOSE)
    out = ReasoningBudget(budget, tuple(tokenize(message + CLOSING)))
    if opened:
        out.thinking = True
        out._body = bytearray(prompt_tail[start + len(THINK_OPEN) :])
    return out


def request_budget(budget: int, message: str, prompt: Sequence[int], vocab: Vocab) -> ReasoningBudget | None:
    """build_budget for a prompt of tokens: the bytes of its last 16 tokens, the forced end tokenized by `vocab`."""
    if budget < 0:
        return None
    tail = b"".join(vocab.piece(t, special=True) for t in prompt[-16:])
    return build_budget(budget, message, tail, lambda text: vocab.tokenize(text, False, True))
