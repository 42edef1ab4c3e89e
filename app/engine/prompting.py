"""A request's prompt against one model: the chat template rendered, the exact tokens, and its sampling resolved."""

from __future__ import annotations

from dataclasses import replace

from app.engine.chat import TemplateError, adds_bos, render_chat
from app.engine.chat_format import THINK_CLOSE, THINK_OPEN
from app.engine.infill import infill_tokens
from app.engine.types import GenerationRequest, InvalidRequest, check_token_ids
from app.runtime.dry import Breakers, resolve_breakers
from app.runtime.llama import Model
from app.runtime.sampling import resolve_logit_bias


def opens_think(prompt_text: str) -> bool:
    """Whether a rendered prompt ends inside an open <think> block (the template started the model's reasoning)."""
    start = prompt_text.rfind(THINK_OPEN)
    return start != -1 and start > prompt_text.rfind(THINK_CLOSE) and not prompt_text[start + len(THINK_OPEN) :].strip()


class PromptBuilder:
    """Reads the model's template and vocabulary only, never a context, so any thread may render (Runtime says why).

    `template` is --chat-template-file's text, else None for the GGUF's own."""

    def __init__(self, model: Model, template: str | None) -> None:
        self.model = model
        self.template = template or model.chat_template
        vocab = model.vocab
        self.bos_text = vocab.piece(vocab.bos, special=True).decode("utf-8", "replace") if vocab.bos >= 0 else ""
        self.eos_text = vocab.piece(vocab.eos, special=True).decode("utf-8", "replace") if vocab.eos >= 0 else ""
        self._breakers: dict[tuple[str, ...], Breakers] = {}  # DRY's sequence breakers, resolved per breaker list

    def render(self, request: GenerationRequest) -> str:
        """The chat template applied to the request's messages (with its tools and template variables)."""
        assert request.messages is not None
        try:
            return render_chat(
                self.template,
                request.messages,
                request.add_generation_prompt,
                bos_token=self.bos_text,
                eos_token=self.eos_text,
                tools=request.tools,
                extra=request.template_kwargs,
            )
        except TemplateError as e:
            raise InvalidRequest(str(e)) from e

    def templated(self, request: GenerationRequest, n_ctx: int) -> tuple[list[int], str]:
        """Exactly the tokens the model will see, and the text they came from (the templated or the raw prompt)."""
        vocab = self.model.vocab
        if request.messages is not None:
            text = self.render(request)
            add = adds_bos(text, vocab.add_bos, self.bos_text)
            return vocab.tokenize(text, add_special=add, parse_special=True), text
        if request.infill is not None:
            tokens = infill_tokens(vocab, request.infill, n_ctx)
            return tokens, vocab.detokenize(tokens, special=True)
        if isinstance(request.prompt, tuple):
            check_token_ids(request.prompt, vocab.n_vocab, "prompt")
            return list(request.prompt), vocab.detokenize(request.prompt, special=True)
        assert request.prompt is not None
        # A special token's text in a raw prompt is that token, as llama-server and vLLM read it, and a prompt that
        # already starts with the BOS is not given a second: /apply-template's text completes as the chat would.
        add = adds_bos(request.prompt, vocab.add_bos, self.bos_text)
        return vocab.tokenize(request.prompt, add_special=add, parse_special=True), request.prompt

    def resolved(self, request: GenerationRequest) -> GenerationRequest:
        """The request with its logit_bias and DRY's breakers resolved against this vocabulary into its sampling."""
        vocab = self.model.vocab
        tokenize = lambda text: vocab.tokenize(text, False, False)  # noqa: E731  (llama-server: no special tokens)
        if request.sampling.dry_on and request.sampling.dry_breakers is None:
            breakers = self._breakers.get(request.dry_sequence_breakers)
            if breakers is None:  # a pass over the vocabulary (~0.3 s for 49k tokens): kept for the next request
                breakers = resolve_breakers(request.dry_sequence_breakers, vocab.all_pieces(), tokenize)
                self._breakers = {**dict(list(self._breakers.items())[-7:]), request.dry_sequence_breakers: breakers}
            request = replace(request, sampling=replace(request.sampling, dry_breakers=breakers))
        if not request.logit_bias:
            return request
        try:
            pairs = resolve_logit_bias(request.logit_bias, tokenize, vocab.n_vocab)
        except ValueError as e:
            raise InvalidRequest(str(e), param="logit_bias") from None
        sampling = replace(request.sampling, logit_bias=request.sampling.logit_bias + pairs)
        return replace(request, sampling=sampling, logit_bias=())
