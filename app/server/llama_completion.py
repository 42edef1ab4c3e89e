"""llama-server's native completion dialect: POST /completion and /infill, its field names in, its result out."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from app.engine.types import MAX_TOP_LOGPROBS, DoneEvent, GenerationRequest, GenerationSummary, Infill, TokenLogprob
from app.server.body import parse_body
from app.server.errors import ApiError
from app.server.flow import CompletionFlow
from app.server.openai_common import StreamFormat, unsupported
from app.server.openai_completions import completion_to_generation
from app.server.schemas import CompletionRequest, SpeculativeOptions

R = TypeVar("R", bound="NativeCompletionRequest")

# The neutral value of each field NativeCompletionRequest refuses otherwise (and what to use instead, if anything).
_NOT_HONOURED: dict[str, tuple[Any, str]] = {
    "post_sampling_probs": (False, "probabilities are the model's own, from before any sampler"),
    "ignore_eos": (False, "generation always stops at the end token"),
}

# llama-server's stop_type for the engine's finish reasons ("word" when a stop string ended it).
_STOP_TYPE = {"length": "limit", "cancelled": "none"}


class NativeCompletionRequest(CompletionRequest):
    """/completion's body: llama-server's names (n_predict; speculative.n_max as flat keys, which llama-server
    itself compiles out and DynaDraft honours), the OpenAI names it also takes, `model` optional."""

    model: str = ""
    prompt: str | list[int] = ""
    n_predict: int | None = None
    return_tokens: bool = False
    spec_n_max: int | None = Field(None, alias="speculative.n_max")
    spec_n_min: int | None = Field(None, alias="speculative.n_min")
    spec_p_min: float | None = Field(None, alias="speculative.p_min")
    n_probs: int | None = None  # each token's logprob and this many alternatives (completion_probabilities)
    # llama-server fields that would change the output and that the engine does not have: refused when set to
    # anything but their neutral value, never silently ignored (other unknown fields are, as everywhere).
    post_sampling_probs: Any = None
    ignore_eos: Any = None


class ExtraChunk(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    text: str
    filename: str = "tmp"


class InfillRequest(NativeCompletionRequest):
    """/infill's body: the code around the cursor, other files as context, and `prompt`, the middle's start."""

    prompt: str = ""
    input_prefix: str
    input_suffix: str
    input_extra: list[ExtraChunk] = []


def native_to_generation(
    req: NativeCompletionRequest, *, sources: Collection[str], request_id: str = "", max_tokens: int = 1
) -> GenerationRequest:
    """The engine request of a body already in OpenAI's names (`with_native_names`): /infill's fields become the
    infill, then the OpenAI text completion's checks and mapping."""
    infill = None
    if isinstance(req, InfillRequest):
        extra = tuple((c.filename, c.text) for c in req.input_extra)
        infill = Infill(req.input_prefix, req.input_suffix, extra=extra, middle=req.prompt, trim=True)
    return completion_to_generation(req, sources=sources, request_id=request_id, max_tokens=max_tokens, infill=infill)


def with_native_names(req: R) -> R:
    """The body with llama-server's names mapped onto OpenAI's, before the shared flow reads it: n_predict (-1: no
    limit) as max_tokens, which it wins over as in llama-server; n_probs as logprobs; the flat speculative.* keys
    merged into DynaDraft's object. What the engine lacks is refused here."""
    for name, (neutral, why) in _NOT_HONOURED.items():
        value = getattr(req, name)
        if value is not None and value != neutral:
            raise unsupported(name, f"{name}={value!r} is not supported: {why}")
    limit = req.n_predict if req.n_predict is not None else req.max_tokens
    if limit is not None and limit != -1 and limit < 1:
        raise ApiError(400, f"n_predict must be -1 (no limit) or >= 1, got {limit}", code="invalid_request")
    update: dict[str, Any] = {"max_tokens": None if limit == -1 else limit}
    if req.n_probs is not None and not 0 <= req.n_probs <= MAX_TOP_LOGPROBS:
        msg = f"n_probs must be in [0, {MAX_TOP_LOGPROBS}], got {req.n_probs}"
        raise ApiError(400, msg, code="invalid_request", param="n_probs")
    if req.n_probs:  # 0 asks for none, as in llama-server
        update["logprobs"] = req.n_probs
    flat = {"n_max": req.spec_n_max, "n_min": req.spec_n_min, "p_min": req.spec_p_min}
    given = {k: v for k, v in flat.items() if v is not None}
    if given:
        spec = req.speculative.model_dump(exclude_none=True) if req.speculative else {}
        update["speculative"] = SpeculativeOptions.model_validate({**spec, **given})
    return req.model_copy(update=update)


def probabilities(logprobs: Sequence[TokenLogprob]) -> list[dict[str, Any]]:
    """llama-server's completion_probabilities: per token its id, text, bytes, logprob and top_logprobs."""

    def entry(token: int, piece: bytes, logprob: float) -> dict[str, Any]:
        return {"id": token, "token": _valid_utf8(piece), "bytes": list(piece), "logprob": logprob}

    return [
        {**entry(lp.token, lp.piece, lp.logprob), "top_logprobs": [entry(*top) for top in lp.top]} for lp in logprobs
    ]


def _valid_utf8(piece: bytes) -> str:
    """The piece's text up to a character it cuts (a character may span tokens), as llama-server's validate_utf8."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError as e:
        return piece[: e.start].decode("utf-8", "replace")


def result(summary: GenerationSummary, model: str, prompt: str, return_tokens: bool, *, stream: bool) -> dict[str, Any]:
    """llama-server's final result object (and DynaDraft's decision record), for a body or a stream's last event."""
    t = summary.timings
    stop_type = "word" if summary.stopping_word else _STOP_TYPE.get(summary.finish_reason, "eos")
    return {
        "index": 0,
        "content": "" if stream else summary.text,
        "tokens": list(summary.tokens) if return_tokens and not stream else [],
        "id_slot": 0,
        "stop": True,
        "model": model,
        "tokens_predicted": len(summary.tokens),
        "tokens_evaluated": summary.prompt_tokens,
        "generation_settings": {"speculative": summary.settings.to_dict()},
        "prompt": prompt,
        "has_new_line": "\n" in summary.text,
        "truncated": False,
        "stop_type": stop_type,
        "stopping_word": summary.stopping_word,
        "tokens_cached": summary.prompt_tokens + len(summary.tokens),  # what the slot holds after it (n_past)
        "timings": t.to_dict(),
        "dynamic_draft": summary.dynamic_draft,
        **({"completion_probabilities": probabilities(summary.logprobs)} if summary.logprobs and not stream else {}),
    }


@dataclass
class NativeFormat(StreamFormat):
    """llama-server's native stream: one `data:` object per piece of text, the result last, no [DONE]."""

    prompt: str = ""
    return_tokens: bool = False
    done_line: ClassVar[str] = ""

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> list[str]:
        chunk: dict[str, Any] = {"index": 0, "content": text, "tokens": [], "stop": False, "id_slot": 0}
        if logprobs:
            chunk["completion_probabilities"] = probabilities(logprobs)
        return [_sse(chunk)]

    def closing(self, done: DoneEvent) -> list[str]:
        return [_sse(result(done.summary, self.model, self.prompt, self.return_tokens, stream=True))]


def _sse(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def install(app: FastAPI, flow: CompletionFlow) -> None:
    async def run(request: Request, req: NativeCompletionRequest, prompt: str) -> Response:
        def fmt(rid: str, created: int, model: str, include_usage: bool) -> NativeFormat:
            return NativeFormat(rid, created, model, include_usage, prompt=prompt, return_tokens=req.return_tokens)

        def to_body(summary: GenerationSummary, **_: Any) -> dict[str, Any]:
            return result(summary, flow.state.model_id, prompt, req.return_tokens, stream=False)

        return await flow.generate(request, with_native_names(req), "cmpl-", native_to_generation, fmt, to_body)

    @app.post("/completion")
    @app.post("/completions")
    async def completion(request: Request) -> Response:
        req = await parse_body(request, NativeCompletionRequest, flow.state.max_body_bytes)
        return await run(request, req, req.prompt if isinstance(req.prompt, str) else "")

    @app.post("/infill")
    async def infill(request: Request) -> Response:
        req = await parse_body(request, InfillRequest, flow.state.max_body_bytes)
        return await run(request, req, req.input_prefix + req.prompt)
