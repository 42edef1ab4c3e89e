"""The OpenAI (legacy) text-completions dialect: a raw prompt in, a completion or its stream out."""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.responses import Response

from app.engine.types import (
    MAX_TOP_LOGPROBS,
    DoneEvent,
    GenerationRequest,
    GenerationSummary,
    Infill,
    TokenLogprob,
)
from app.server.body import parse_body
from app.server.constraints import completion_grammar
from app.server.errors import ApiError
from app.server.flow import CompletionFlow
from app.server.logprobs import TokenTexts, completion_logprobs
from app.server.openai_common import (
    StreamFormat,
    build_generation,
    common_refusals,
    finish_reason,
    response_extras,
    sse,
    unsupported,
    usage,
)
from app.server.schemas import (
    Completion,
    CompletionChoice,
    CompletionLogprobs,
    CompletionRequest,
)


def completion_to_generation(
    req: CompletionRequest,
    *,
    sources: Collection[str],
    request_id: str = "",
    max_tokens: int = 1,
    infill: Infill | None = None,
) -> GenerationRequest:
    """Validate a text-completion request and build the engine request (raw prompt, no chat template); `infill`
    (llama-server's /infill) takes the place of the prompt."""
    common_refusals(req)
    if req.logprobs is not None and not 0 <= req.logprobs <= MAX_TOP_LOGPROBS:
        msg = f"logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {req.logprobs}"
        raise ApiError(400, msg, code="invalid_request", param="logprobs")
    if req.echo:
        raise unsupported("echo", "echo is not supported")
    if req.best_of is not None and req.best_of != 1:
        raise unsupported("best_of", "only best_of=1 is supported")
    what: dict[str, Any] = {"infill": infill} if infill is not None else prompt_or_infill(req)
    return build_generation(
        req,
        request_id,
        max_tokens,
        sources,
        grammar=completion_grammar(req),
        logprobs=req.logprobs,
        **what,
    )


def prompt_or_infill(req: CompletionRequest) -> dict[str, Any]:
    """The engine request's prompt; with a suffix, the prompt is the code before the cursor: fill-in-the-middle,
    all of both kept (the /infill route trims as llama-server does; this one refuses what does not fit)."""
    prompt = one_prompt(req.prompt)
    if req.suffix is None:
        return {"prompt": prompt}
    if not isinstance(prompt, str):
        raise ApiError(400, "suffix needs the prompt as text", code="invalid_request", param="suffix")
    return {"infill": Infill(prompt, req.suffix)}


def one_prompt(prompt: str | list[str] | list[int] | list[list[int]]) -> str | tuple[int, ...]:
    """The request's one prompt: text, or token ids (a list of them, or a batch of one), as OpenAI, llama-server
    and vLLM take them; ids are used as they are (no BOS added) and checked against the vocabulary by the engine."""
    one: object = prompt
    if isinstance(prompt, list) and len(prompt) == 1 and not isinstance(prompt[0], int):
        one = prompt[0]  # a batch of one
    if isinstance(one, list) and not all(isinstance(t, int) for t in one):
        raise unsupported("prompt", "exactly one prompt is supported (batched prompts are not)")
    if not one:
        raise ApiError(400, "prompt must not be empty", code="invalid_request", param="prompt")
    return one if isinstance(one, str) else tuple(cast(list[int], one))


def completion(
    summary: GenerationSummary, *, id: str, created: int, model: str, logprobs: int | None = None
) -> Completion:
    lp = None if logprobs is None else completion_logprobs(summary.logprobs, TokenTexts(), with_top=logprobs > 0)
    return Completion(
        id=id,
        created=created,
        model=model,
        choices=[CompletionChoice(text=summary.text, finish_reason=finish_reason(summary), logprobs=lp)],
        usage=usage(summary),
        **response_extras(summary),
    )


def completion_chunk(
    *, id: str, created: int, model: str, text: str, logprobs: CompletionLogprobs | None = None
) -> Completion:
    choice = CompletionChoice(text=text, finish_reason=None, logprobs=logprobs)
    return Completion(id=id, created=created, model=model, choices=[choice])


def completion_final_chunks(
    summary: GenerationSummary, *, id: str, created: int, model: str, include_usage: bool
) -> list[Completion]:
    extras = response_extras(summary)
    final = Completion(
        id=id,
        created=created,
        model=model,
        choices=[CompletionChoice(text="", finish_reason=finish_reason(summary))],
        usage=usage(summary) if include_usage else None,
        **extras,
    )
    return [final]


@dataclass
class CompletionFormat(StreamFormat):
    logprobs: int | None = None

    def __post_init__(self) -> None:
        self.texts = TokenTexts()

    def text(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> list[str]:
        lp = None
        if self.logprobs is not None:
            lp = completion_logprobs(logprobs, self.texts, with_top=self.logprobs > 0)
        return [sse(completion_chunk(id=self.id, created=self.created, model=self.model, text=text, logprobs=lp))]

    def closing(self, done: DoneEvent) -> list[str]:
        chunks = completion_final_chunks(
            done.summary, id=self.id, created=self.created, model=self.model, include_usage=self.include_usage
        )
        return [sse(c) for c in chunks]


def install(app: FastAPI, flow: CompletionFlow) -> None:
    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        req = await parse_body(request, CompletionRequest, flow.state.max_body_bytes)
        fmt = functools.partial(CompletionFormat, logprobs=req.logprobs)
        to_body = functools.partial(completion, logprobs=req.logprobs)
        return await flow.generate(request, req, "cmpl-", completion_to_generation, fmt, to_body)
