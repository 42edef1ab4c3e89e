"""Pydantic wire models of the OpenAI-compatible API (requests, responses, stream chunks)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.speculative import registry

# Requests are validated strictly (no "16" -> 16, no true -> 1) so a malformed request gets a clear 400 instead of a
# guess; unknown top-level fields are ignored as OpenAI-compatible servers do, because clients send many we don't use.
_STRICT = ConfigDict(strict=True, extra="ignore")


# -- request pieces ------------------------------------------------------------------------------------------------
class TextPart(BaseModel):
    """A content part; only "text" parts are supported (the adapter refuses images and audio clearly)."""

    model_config = ConfigDict(strict=True, extra="allow")

    type: str
    text: str | None = None


class FunctionCall(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    name: str = Field(min_length=1)
    arguments: str | dict[str, Any] = "{}"  # OpenAI sends a JSON text; some clients send the object itself


class ToolCallIn(BaseModel):
    """A tool call in an assistant message of the history (as this server or OpenAI returned it)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    # "developer" is OpenAI's newer name for "system"; "function" is refused by the adapter with a clear message.
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None


class FunctionDef(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    type: Literal["function"]
    function: FunctionDef


class NamedFunction(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    name: str = Field(min_length=1)


class NamedToolChoice(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    type: Literal["function"]
    function: NamedFunction


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    include_usage: bool = False


class SpeculativeOptions(BaseModel):
    """DynaDraft's request extension: a per-request speculative-decoding override (see SpecSettings)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    # The allowed sources are the registry's, read when validating and when the schema is written (not at import),
    # so a source registered later is accepted and documented like the built-in ones.
    source: str | None = Field(None, json_schema_extra=lambda schema: schema.update(enum=[*registry.choices(), None]))
    n_max: int | None = None
    n_min: int | None = None
    p_min: float | None = None
    adaptive: bool | None = None
    cost_stop: bool | None = None  # stop each draft where one more token no longer pays, by measured costs

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str | None) -> str | None:
        return None if value is None else registry.check_source(value)


class JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    type: str
    json_schema: JsonSchemaFormat | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")  # llama.cpp's json_object + schema form

    @classmethod
    def for_schema(cls, schema: dict[str, Any] | None, name: str = "output") -> ResponseFormat:
        """Chat's json_schema format for a schema another dialect gave (Anthropic's output_config, Responses' text)."""
        return cls(type="json_schema", json_schema=JsonSchemaFormat.model_validate({"name": name, "schema": schema}))


class _SamplingFields(BaseModel):
    """Sampling and limits shared by chat and text completions (llama.cpp's extras included)."""

    model_config = _STRICT

    model: str = Field(min_length=1)
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    # llama-server's further samplers, under its names (app.runtime.sampling says what each does)
    typical_p: float | None = None
    top_n_sigma: float | None = None
    xtc_probability: float | None = None
    xtc_threshold: float | None = None
    dynatemp_range: float | None = None
    dynatemp_exponent: float | None = None
    dry_multiplier: float | None = None
    dry_base: float | None = None
    dry_allowed_length: int | None = None
    dry_penalty_last_n: int | None = None
    dry_sequence_breakers: list[str] | None = None
    mirostat: int | None = None
    mirostat_tau: float | None = None
    mirostat_eta: float | None = None
    # llama-server's that the sampler lacks: refused unless neutral (never silently ignored)
    min_keep: int | None = None
    adaptive_target: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    # OpenAI's {"token id": bias} or llama-server's [[token id or text, bias], ...]; false bans, as in llama-server
    logit_bias: dict[str, float | bool] | list[tuple[int | str, float | bool]] | None = None
    user: str | None = None
    speculative: SpeculativeOptions | None = None
    cache_prompt: bool = True  # llama.cpp's field: False re-prefills the whole prompt (reproducible logits)
    grammar: str | None = None  # llama.cpp's field: a GBNF grammar the output must follow
    json_schema: dict[str, Any] | None = None  # llama.cpp's field: a JSON schema the output must follow


class ChatCompletionRequest(_SamplingFields):
    messages: list[ChatMessage]
    max_completion_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    functions: list[Any] | None = None
    function_call: Any = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    chat_template_kwargs: dict[str, Any] | None = None  # llama.cpp's field: extra chat-template variables
    reasoning_format: Literal["auto", "none", "deepseek"] | None = None  # llama.cpp's: "none" keeps <think> inline
    # llama-server's reasoning budget: tokens the <think> block may take (-1: no limit, 0: end it at once), under
    # either of its names, and the text committed before the forced closing tag
    reasoning_budget_tokens: int | None = None
    thinking_budget_tokens: int | None = None
    reasoning_budget_message: str | None = None


class CompletionRequest(_SamplingFields):
    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: int | None = None
    echo: bool | None = None
    best_of: int | None = None
    suffix: str | None = None


# -- responses -----------------------------------------------------------------------------------------------------
class ModelCard(BaseModel):
    """OpenAI's model object; `type`, `display_name` and `created_at` are Anthropic's names for the same, so both
    SDKs' models.list() and models.retrieve() read it."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "dynadraft"
    # llama-server's extension: n_ctx (the window a request may fill), n_ctx_train, n_params, size, n_vocab
    meta: dict[str, int | None] | None = None
    type: Literal["model"] = "model"
    display_name: str = ""
    created_at: str = ""  # RFC 3339
    max_input_tokens: int | None = None  # Anthropic's name for the context window (meta.n_ctx)


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
    has_more: bool = False  # Anthropic's paging fields: one page, always
    first_id: str | None = None
    last_id: str | None = None


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0


class CompletionTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None  # with a reasoning budget: its block's tokens


class FunctionCallOut(BaseModel):
    name: str
    arguments: str


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut


class ToolCallDelta(BaseModel):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: FunctionCallOut | None = None


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprobOut(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprobOut]


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallOut] | None = None


class ChatChoice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: str | None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletion(BaseModel):
    """The non-streaming chat response, plus DynaDraft's `timings` (llama.cpp names) and `dynamic_draft` record."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    system_fingerprint: str | None = None
    timings: dict[str, Any] | None = None
    dynamic_draft: dict[str, Any] | None = None
    per_source: dict[str, Any] | None = None  # {"class", "subclass", "sources", "memory"}: openai_common.per_source
    reasoning_budget: dict[str, Any] | None = None  # with a reasoning budget: its tokens and whether it was forced


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: str | None = None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    system_fingerprint: str | None = None
    usage: Usage | None = None
    timings: dict[str, Any] | None = None
    dynamic_draft: dict[str, Any] | None = None
    per_source: dict[str, Any] | None = None  # {"class", "subclass", "sources", "memory"}: openai_common.per_source
    reasoning_budget: dict[str, Any] | None = None  # with a reasoning budget: its tokens and whether it was forced


class CompletionLogprobs(BaseModel):
    """The legacy completions form: parallel lists per token."""

    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]] | None
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    finish_reason: str | None
    logprobs: CompletionLogprobs | None = None


class Completion(BaseModel):
    """A text completion (or, with `stream`, one chunk of it: the same object with partial `text`)."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None
    system_fingerprint: str | None = None
    timings: dict[str, Any] | None = None
    dynamic_draft: dict[str, Any] | None = None
    per_source: dict[str, Any] | None = None  # {"class", "subclass", "sources", "memory"}: openai_common.per_source
    reasoning_budget: dict[str, Any] | None = None  # with a reasoning budget: its tokens and whether it was forced
