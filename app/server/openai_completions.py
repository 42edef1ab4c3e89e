"""The OpenAI (legacy) text-completions dialect: a raw prompt in, a completion or its stream out."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary
from app.server.body import parse_body
from app.server.errors import ApiError
from app.server.flow import CompletionFlow
from app.server.openai_common import (
    StreamFormat,
    build_generation,
    common_refusals,
    finish_reason,
    sse,
    unsupported,
    usage,
)
from app.server.schemas import (
    Completion,
    CompletionChoice,
    CompletionRequest,
)


def completion_to_generation(
    req: CompletionRequest, *, has_draft: bool, request_id: str = "", max_tokens: int = 1
) -> GenerationRequest:
    """Validate a text-completion request and build the engine request (raw prompt, no chat template)."""
    common_refusals(req)
    if req.logprobs is not None:
        raise unsupported("logprobs", "logprobs are not supported by this server")
    if req.echo:
        raise unsupported("echo", "echo is not supported")
    if req.best_of is not None and req.best_of != 1:
        raise unsupported("best_of", "only best_of=1 is supported")
    if req.suffix:
        raise unsupported("suffix", "suffix (fill-in-the-middle) is not supported")
    prompt = req.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            if prompt and not isinstance(prompt[0], str):
                raise unsupported("prompt", "token-id prompts are not supported; send the prompt as text")
            raise unsupported("prompt", "exactly one prompt string is supported (batched prompts are not)")
        prompt = prompt[0]
    assert isinstance(prompt, str)
    if not prompt:
        raise ApiError(400, "prompt must not be empty", code="invalid_request", param="prompt")
    return build_generation(req, request_id, max_tokens, has_draft, prompt=prompt)


def completion(summary: GenerationSummary, *, id: str, created: int, model: str) -> Completion:
    return Completion(
        id=id,
        created=created,
        model=model,
        choices=[CompletionChoice(text=summary.text, finish_reason=finish_reason(summary))],
        usage=usage(summary),
        timings=summary.timings.to_dict(),
        dynamic_draft=summary.dynamic_draft,
    )


def completion_chunk(*, id: str, created: int, model: str, text: str) -> Completion:
    return Completion(id=id, created=created, model=model, choices=[CompletionChoice(text=text, finish_reason=None)])


def completion_final_chunks(
    summary: GenerationSummary, *, id: str, created: int, model: str, include_usage: bool
) -> list[Completion]:
    extras: dict[str, Any] = {"timings": summary.timings.to_dict(), "dynamic_draft": summary.dynamic_draft}
    final = Completion(
        id=id,
        created=created,
        model=model,
        choices=[CompletionChoice(text="", finish_reason=finish_reason(summary))],
        usage=usage(summary) if include_usage else None,
        **extras,
    )
    return [final]


class CompletionFormat(StreamFormat):
    def text(self, text: str) -> str:
        return sse(completion_chunk(id=self.id, created=self.created, model=self.model, text=text))

    def closing(self, done: DoneEvent) -> list[str]:
        chunks = completion_final_chunks(
            done.summary, id=self.id, created=self.created, model=self.model, include_usage=self.include_usage
        )
        return [sse(c) for c in chunks]


def install(app: FastAPI, flow: CompletionFlow) -> None:
    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        req = await parse_body(request, CompletionRequest, flow.state.max_body_bytes)
        return await flow.generate(request, req, "cmpl", completion_to_generation, CompletionFormat, completion)
