"""llama-server's /tokenize and /detokenize: token ids and counts for clients that size their prompts themselves."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

from app.engine.runtime import Tokenizer
from app.engine.types import EngineError, check_token_ids
from app.server.body import parse_body
from app.server.errors import ApiError, from_engine_error
from app.server.state import ServerState

MAX_TOKENS_IN = 1 << 20
"""At most this many ids per /detokenize: far above any context window, small enough to answer in a moment."""


class TokenizeBody(BaseModel):
    """llama-server's fields and defaults; `content` is text only (its mixed text-and-ids form is not supported)."""

    model_config = ConfigDict(strict=True, extra="ignore")
    content: str = ""
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False


class DetokenizeBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    tokens: list[int] = Field(default_factory=list, max_length=MAX_TOKENS_IN)


def piece_json(piece: bytes) -> str | list[int]:
    """A piece as llama-server writes it: text when it is whole UTF-8, else its byte values."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return list(piece)


def tokenize(tok: Tokenizer, body: TokenizeBody) -> dict[str, Any]:
    if not body.content:
        return {"tokens": []}
    if not body.with_pieces:
        return {"tokens": tok.tokenize(body.content, body.add_special, body.parse_special)}
    pieces = tok.pieces(body.content, body.add_special, body.parse_special)
    return {"tokens": [{"id": t, "piece": piece_json(p)} for t, p in pieces]}


def detokenize(tok: Tokenizer, tokens: list[int], n_vocab: int | None) -> dict[str, Any]:
    check_token_ids(tokens, n_vocab, "tokens")
    try:
        return {"content": tok.detokenize(tokens, special=True)}
    except ValueError as e:
        raise ApiError(400, str(e), code="invalid_request", param="tokens") from None


def install(app: FastAPI, state: ServerState) -> None:
    @app.post("/tokenize")
    async def post_tokenize(request: Request) -> dict[str, Any]:
        body = await parse_body(request, TokenizeBody, state.max_body_bytes)
        try:  # off the event loop: a long text takes a while, and an external runtime answers over HTTP
            return await asyncio.to_thread(tokenize, state.engine.tokenizer, body)
        except EngineError as e:
            raise from_engine_error(e) from None

    @app.post("/detokenize")
    async def post_detokenize(request: Request) -> dict[str, Any]:
        body = await parse_body(request, DetokenizeBody, state.max_body_bytes)
        try:
            n_vocab = state.engine.model_meta.n_vocab
            return await asyncio.to_thread(detokenize, state.engine.tokenizer, body.tokens, n_vocab)
        except EngineError as e:
            raise from_engine_error(e) from None
