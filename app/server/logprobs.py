"""The engine's token log-probabilities in OpenAI's two wire forms (chat `content` list, completions' parallel lists).

A token's `token` string is the text it completes: a UTF-8 character split across tokens belongs to the token that
finishes it (the others show ""), so the strings concatenate to exactly the generated text; `bytes` are the token's
own bytes.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence

from app.engine.types import TokenLogprob
from app.server.schemas import ChoiceLogprobs, CompletionLogprobs, TokenLogprobOut, TopLogprob


class TokenTexts:
    """Token bytes -> the text each one completes, across calls (one per response or stream)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.offset = 0  # characters of text before the next token

    def text(self, piece: bytes) -> str:
        out = self._decoder.decode(piece)
        self.offset += len(out)
        return out


def _alt(piece: bytes) -> str:
    return piece.decode("utf-8", "replace")


def chat_logprobs(entries: Sequence[TokenLogprob], texts: TokenTexts) -> ChoiceLogprobs:
    content = [
        TokenLogprobOut(
            token=texts.text(e.piece),
            logprob=e.logprob,
            bytes=list(e.piece),
            top_logprobs=[TopLogprob(token=_alt(p), logprob=lp, bytes=list(p)) for _, p, lp in e.top],
        )
        for e in entries
    ]
    return ChoiceLogprobs(content=content)


def completion_logprobs(entries: Sequence[TokenLogprob], texts: TokenTexts, with_top: bool) -> CompletionLogprobs:
    tokens: list[str] = []
    offsets: list[int] = []
    for e in entries:
        offsets.append(texts.offset)
        tokens.append(texts.text(e.piece))
    top: list[dict[str, float]] | None = None
    if with_top:
        top = [{_alt(p): lp for _, p, lp in e.top} for e in entries]
    return CompletionLogprobs(
        tokens=tokens, token_logprobs=[e.logprob for e in entries], top_logprobs=top, text_offset=offsets
    )
