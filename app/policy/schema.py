"""The calibration table file format as a strict pydantic schema: a hand-edited or damaged file fails here, whole."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from app.policy.content_class import TABLE_CLASSES

# strict: no 3.0 for an int or "1" for a number; forbid: a misspelt key is an error, not a silent default. pydantic's
# JSON parser also refuses absurd nesting with an error instead of Python's RecursionError.
_STRICT = ConfigDict(strict=True, extra="forbid")


class _Setting(BaseModel):
    model_config = _STRICT
    source: StrictStr = "draft"  # the names the draft-source registry knows are checked by SpecSettings
    n_max: StrictInt = Field(0, ge=0, le=64)
    n_min: StrictInt = Field(0, ge=0, le=64)
    p_min: StrictFloat | StrictInt = Field(0.0, ge=0.0, le=1.0)
    adaptive: StrictBool = False
    cost_stop: StrictBool = False  # optional: tables before the cost stop have no such key


class _Row(BaseModel):
    model_config = _STRICT
    ctx_lo: StrictInt = Field(ge=0)
    ctx_hi: StrictInt = Field(ge=1)
    setting: _Setting
    median_tps: StrictFloat | StrictInt = Field(ge=0, allow_inf_nan=False)
    spread_tps: StrictFloat | StrictInt = Field(ge=0, allow_inf_nan=False)
    repeats: StrictInt = Field(ge=0)
    safe: StrictBool
    prompt_tokens: StrictInt | None = None
    # Version 2: the row's content class (one of TABLE_CLASSES: a class or a sub-class); absent or null for the
    # context-only frontier.
    content_class: StrictStr | None = None
    # The median tok/s on each of the range's prompts (two or more), for cross-validation; absent where one prompt.
    prompt_tps: list[StrictFloat | StrictInt] = []

    @field_validator("prompt_tps")
    @classmethod
    def _positive(cls, v: list[float]) -> list[float]:
        if any(not math.isfinite(x) or x <= 0 for x in v):
            raise ValueError("must be finite numbers > 0")
        return v

    @field_validator("content_class")
    @classmethod
    def _known_class(cls, v: str | None) -> str | None:
        if v is not None and v not in TABLE_CLASSES:
            raise ValueError(f"must be one of {', '.join(TABLE_CLASSES)} or null")
        return v


class _Fingerprint(BaseModel):
    model_config = _STRICT
    target_sha256: StrictStr
    draft_name: StrictStr | None
    draft_sha256: StrictStr | None
    backend: StrictStr
    device: StrictStr
    llama_build: StrictStr
    n_ctx: StrictInt
    n_gpu_layers: StrictInt
    n_threads: StrictInt
    flash_attn: Literal["auto", "on", "off"] | StrictBool  # a boolean in tables written before "auto" existed


class TableFile(BaseModel):
    """tables/<table_id>.json."""

    model_config = _STRICT
    schema_version: StrictInt = Field(ge=1, le=2)  # this build reads versions 1 and 2 (a Literal would take 1.0)
    table_id: StrictStr = Field(min_length=1)
    created_at: StrictStr = Field(min_length=1)
    spread_kind: Literal["iqr"] = "iqr"
    notes: StrictStr = ""
    fingerprint: _Fingerprint
    rows: list[_Row] = Field(max_length=100_000)

    @model_validator(mode="after")
    def _classes_need_v2(self) -> TableFile:
        if self.schema_version == 1 and any(r.content_class is not None for r in self.rows):
            raise ValueError("rows with a content_class need schema_version 2")
        return self


class ActivePointer(BaseModel):
    """active.json."""

    model_config = ConfigDict(strict=True)  # extra keys tolerated: the pointer may grow fields
    schema_version: StrictInt | None = None
    table_id: StrictStr = Field(min_length=1)


def describe(err: ValidationError) -> str:
    """The first problems of a failed validation as one line, e.g. "rows.0.setting.n_max: Input should be ..."."""
    parts = []
    for e in err.errors()[:3]:
        loc = ".".join(str(p) for p in e.get("loc", ())) or "file"
        parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def validate_table_json(text: str | bytes) -> dict[str, Any]:
    """The table file's content as plain data, or ValueError saying what is wrong (never RecursionError)."""
    try:
        return TableFile.model_validate_json(text).model_dump()
    except ValidationError as e:
        raise ValueError(f"not a valid calibration table: {describe(e)}") from None


def validate_pointer_json(text: str | bytes) -> str:
    """The table id in active.json, or ValueError."""
    try:
        return ActivePointer.model_validate_json(text).table_id
    except ValidationError as e:
        raise ValueError(f"not a valid active pointer: {describe(e)}") from None
