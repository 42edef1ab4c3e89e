"""The frontier table: measured tok/s per (prompt-token range, candidate setting), built from raw samples."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.policy.content_class import TABLE_CLASSES
from app.policy.fingerprint import Fingerprint
from app.policy.stats import iqr, median
from app.speculative.settings import PLAIN, SpecSettings

SCHEMA_VERSION = 2
"""Bump when the JSON layout changes; a file with a version outside READABLE_VERSIONS is refused with a reason.

2: rows may carry a content class (a frontier per (context range, class)); 1: context-only rows (still read)."""
READABLE_VERSIONS = (1, 2)

SPREAD_KIND = "iqr"
"""How `FrontierRow.spread_tps` is computed from the repeats (interquartile range, tok/s)."""


def _known(setting: SpecSettings) -> SpecSettings:
    """A table's setting names a source this build has (a table from a build with another source is refused)."""
    from app.speculative import registry  # the sources load llama.cpp's bindings: only when a table is read

    registry.check_source(setting.source)
    return setting


def normalize(setting: SpecSettings) -> SpecSettings:
    """Every plain-decoding spelling (n_max 0 or source "none") is the one candidate PLAIN ("off")."""
    return PLAIN if setting.is_plain else setting


@dataclass(frozen=True)
class FrontierRow:
    """One measured candidate in one prompt-token range [ctx_lo, ctx_hi).

    median_tps: median generation tok/s over the repeats; spread_tps: their IQR; repeats: how many runs;
    safe: the calibration accepted the runs (finished, no error/OOM, output checks passed); an unsafe row is
    kept for the record but never selected. prompt_tokens: the prompt length actually measured, if known.
    content_class: the class (or copy_edit's sub-class) of prompt measured (app.policy.content_class.TABLE_CLASSES);
    None for the context-only rows, which every class falls back to where it has no evidence of its own.
    prompt_tps: the median tok/s on each prompt of the range, in the calibration's order, where it measured two or
    more (empty otherwise): what cross-validates a choice over the prompts (app.policy.held_out).
    """

    ctx_lo: int
    ctx_hi: int
    setting: SpecSettings
    median_tps: float
    spread_tps: float
    repeats: int
    safe: bool
    prompt_tokens: int | None = None
    content_class: str | None = None
    prompt_tps: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if any(not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0 for v in self.prompt_tps):
            raise ValueError(f"row prompt_tps must be finite numbers > 0, got {self.prompt_tps!r}")
        if self.content_class is not None and self.content_class not in TABLE_CLASSES:
            raise ValueError(f"row content_class must be one of {TABLE_CLASSES} or null, got {self.content_class!r}")
        if not (isinstance(self.ctx_lo, int) and isinstance(self.ctx_hi, int) and 0 <= self.ctx_lo < self.ctx_hi):
            raise ValueError(f"row range must satisfy 0 <= ctx_lo < ctx_hi, got [{self.ctx_lo}, {self.ctx_hi})")
        for name in ("median_tps", "spread_tps"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise ValueError(f"row {name} must be a finite number >= 0, got {v!r}")
        if not isinstance(self.repeats, int) or self.repeats < 0:
            raise ValueError(f"row repeats must be an integer >= 0, got {self.repeats!r}")
        if self.safe and (self.repeats < 1 or self.median_tps <= 0):
            raise ValueError("a safe row needs at least one repeat and a positive median")

    @property
    def context(self) -> tuple[int, int]:
        return (self.ctx_lo, self.ctx_hi)

    @property
    def key(self) -> tuple[str | None, int, int]:
        """(class, ctx_lo, ctx_hi): the frontier this row belongs to."""
        return (self.content_class, self.ctx_lo, self.ctx_hi)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "ctx_lo": self.ctx_lo,
            "ctx_hi": self.ctx_hi,
            "setting": self.setting.to_dict(),
            "median_tps": self.median_tps,
            "spread_tps": self.spread_tps,
            "repeats": self.repeats,
            "safe": self.safe,
            "prompt_tokens": self.prompt_tokens,
        }
        if self.content_class is not None:  # context-only rows keep the version-1 layout
            out["content_class"] = self.content_class
        if self.prompt_tps:
            out["prompt_tps"] = list(self.prompt_tps)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FrontierRow:
        if not isinstance(data, dict):
            raise ValueError("row must be an object")
        if not isinstance(data.get("safe"), bool):
            raise ValueError("row.safe must be a boolean")
        pt = data.get("prompt_tokens")
        if pt is not None and not isinstance(pt, int):
            raise ValueError("row.prompt_tokens must be an integer or null")
        klass = data.get("content_class")
        if klass is not None and not isinstance(klass, str):
            raise ValueError("row.content_class must be a string or null")
        per_prompt = data.get("prompt_tps", [])
        if not isinstance(per_prompt, list):
            raise ValueError("row.prompt_tps must be a list of numbers")
        try:
            return cls(
                ctx_lo=data["ctx_lo"],
                ctx_hi=data["ctx_hi"],
                setting=normalize(_known(SpecSettings.from_dict(data["setting"]))),
                median_tps=data["median_tps"],
                spread_tps=data["spread_tps"],
                repeats=data["repeats"],
                safe=data["safe"],
                prompt_tokens=pt,
                content_class=klass,
                prompt_tps=tuple(per_prompt),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed row: {exc!r}") from exc


@dataclass(frozen=True)
class FrontierTable:
    """A calibrated frontier for one engine fingerprint; rows are validated and sorted on construction.

    The context-only rows (content_class None) are the table's main frontier and must exist; rows of a class form
    that class's own frontier, usually over fewer ranges. Within the context-only rows and within each class,
    ranges may leave gaps but must not overlap; each (class, range, setting) appears once. `ranges` are the
    context-only ranges; `class_ranges` those of each class that has rows.
    """

    table_id: str
    created_at: str
    fingerprint: Fingerprint
    rows: tuple[FrontierRow, ...]
    notes: str = ""
    schema_version: int = SCHEMA_VERSION
    spread_kind: str = SPREAD_KIND
    ranges: tuple[tuple[int, int], ...] = field(init=False)
    class_ranges: dict[str, tuple[tuple[int, int], ...]] = field(init=False)

    def __post_init__(self) -> None:
        if not self.rows:
            raise ValueError("a frontier table needs at least one row")
        order = {c: i for i, c in enumerate(TABLE_CLASSES)}
        rows = tuple(
            sorted(
                self.rows,
                key=lambda r: (-1 if r.content_class is None else order[r.content_class], r.ctx_lo, r.ctx_hi,
                               r.setting.label()),
            )
        )  # fmt: skip
        object.__setattr__(self, "rows", rows)
        by_class: dict[str | None, list[tuple[int, int]]] = {}
        for klass in dict.fromkeys(r.content_class for r in rows):
            ranges = sorted({r.context for r in rows if r.content_class == klass})
            where = "context ranges" if klass is None else f"context ranges of class {klass!r}"
            for (lo_a, hi_a), (lo_b, _) in zip(ranges, ranges[1:], strict=False):
                if lo_b < hi_a:
                    raise ValueError(f"{where} overlap: [{lo_a}, {hi_a}) and [{lo_b}, ...)")
            by_class[klass] = ranges
        if None not in by_class:
            raise ValueError("a frontier table needs context-only rows (content_class null): every class falls back "
                             "to them")  # fmt: skip
        seen: set[tuple[str | None, int, int, SpecSettings]] = set()
        for r in rows:
            key = (*r.key, r.setting)
            if key in seen:
                cls = "" if r.content_class is None else f" (class {r.content_class})"
                raise ValueError(f"duplicate row for {r.setting.label()} in [{r.ctx_lo}, {r.ctx_hi}){cls}")
            seen.add(key)
        object.__setattr__(self, "ranges", tuple(by_class.pop(None)))
        object.__setattr__(self, "class_ranges", {k: tuple(v) for k, v in by_class.items() if k is not None})

    def rows_in(self, ctx: tuple[int, int], content_class: str | None = None) -> list[FrontierRow]:
        """The rows of one range of the context-only frontier, or of a class's frontier."""
        return [r for r in self.rows if r.context == ctx and r.content_class == content_class]

    @property
    def context_rows(self) -> list[FrontierRow]:
        """The context-only rows (the main frontier)."""
        return [r for r in self.rows if r.content_class is None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "table_id": self.table_id,
            "created_at": self.created_at,
            "spread_kind": self.spread_kind,
            "notes": self.notes,
            "fingerprint": self.fingerprint.to_dict(),
            "rows": [r.to_dict() for r in self.rows],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FrontierTable:
        """Parse and validate; raises ValueError with a readable message on anything unexpected."""
        if not isinstance(data, dict):
            raise ValueError("table must be a JSON object")
        version = data.get("schema_version")
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            raise ValueError(f"unsupported schema_version {version!r} (this build reads {READABLE_VERSIONS})")
        if data.get("spread_kind", SPREAD_KIND) != SPREAD_KIND:
            raise ValueError(f"unsupported spread_kind {data.get('spread_kind')!r}")
        rows = data.get("rows")
        if not isinstance(rows, list):
            raise ValueError("table.rows must be a list")
        for key in ("table_id", "created_at"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise ValueError(f"table.{key} must be a non-empty string")
        notes = data.get("notes", "")
        if not isinstance(notes, str):
            raise ValueError("table.notes must be a string")
        if version == 1 and any(isinstance(r, dict) and r.get("content_class") is not None for r in rows):
            raise ValueError("a schema_version 1 table has no content classes; rows with content_class need version 2")
        return cls(
            table_id=data["table_id"],
            created_at=data["created_at"],
            fingerprint=Fingerprint.from_dict(data.get("fingerprint")),  # type: ignore[arg-type]
            rows=tuple(FrontierRow.from_dict(r) for r in rows),
            notes=notes,
            schema_version=version,
        )

    @classmethod
    def from_json(cls, text: str) -> FrontierTable:
        """Parse a table file: the schema (app/policy/schema) checks the whole file first, then the table's rules."""
        from app.policy.schema import validate_table_json

        return cls.from_dict(validate_table_json(text))


@dataclass(frozen=True)
class Measurement:
    """Raw calibration output for one (range, setting): the tok/s of each repeat and whether the runs were safe."""

    ctx_lo: int
    ctx_hi: int
    setting: SpecSettings
    samples_tps: tuple[float, ...]
    safe: bool
    prompt_tokens: int | None = None
    content_class: str | None = None
    prompt_tps: tuple[float, ...] = ()  # median tok/s per prompt, where two or more were measured


def build_rows(measurements: Iterable[Measurement], require_plain: bool = True) -> list[FrontierRow]:
    """Turn raw samples into rows: median tok/s, IQR spread, repeat count, safety.

    A measurement without samples becomes an unsafe row (the setting failed to run). With `require_plain`, every
    range must include plain decoding: it is the baseline DD must be able to pick (often fastest on small CPUs).
    """
    rows: list[FrontierRow] = []
    for m in measurements:
        samples = [float(s) for s in m.samples_tps]
        if any(not math.isfinite(s) or s < 0 for s in samples):
            raise ValueError(f"bad tok/s sample for {m.setting.label()} in [{m.ctx_lo}, {m.ctx_hi}): {samples}")
        ok = m.safe and bool(samples) and median(samples) > 0
        rows.append(
            FrontierRow(
                ctx_lo=m.ctx_lo,
                ctx_hi=m.ctx_hi,
                setting=normalize(m.setting),
                median_tps=median(samples) if samples else 0.0,
                spread_tps=iqr(samples) if samples else 0.0,
                repeats=len(samples),
                safe=ok,
                prompt_tokens=m.prompt_tokens,
                content_class=m.content_class,
                prompt_tps=m.prompt_tps if ok else (),
            )
        )
    if require_plain:
        ranges = {r.key for r in rows}
        with_plain = {r.key for r in rows if r.setting == PLAIN}
        missing = sorted(((lo, hi) if c is None else (c, lo, hi) for c, lo, hi in ranges - with_plain), key=str)
        if missing:
            raise ValueError(f"plain decoding ('off') was not measured in range(s) {missing}")
    return rows


def ranges_from_points(points: Sequence[int], upper: int | None = None) -> list[tuple[int, int]]:
    """Contiguous ranges around calibrated prompt lengths, one per point.

    Boundaries sit at the geometric mean of neighbouring points (speed falls off roughly with log context, so
    the midpoint in log space splits the evidence fairly). The first range starts at 0; the last ends at `upper`
    (exclusive) or just past the largest point, so longer prompts are out of range rather than extrapolated.
    """
    pts = sorted(set(points))
    if not pts or pts[0] <= 0:
        raise ValueError("points must be positive prompt-token counts")
    bounds = [0]
    for a, b in zip(pts, pts[1:], strict=False):
        bounds.append(max(a + 1, min(b, math.isqrt(a * b))))
    end = pts[-1] + 1 if upper is None else upper
    if end <= pts[-1]:
        raise ValueError(f"upper ({upper}) must exceed the largest point ({pts[-1]})")
    bounds.append(end)
    return list(zip(bounds, bounds[1:], strict=False))


def new_table(fingerprint: Fingerprint, rows: Iterable[FrontierRow], notes: str = "") -> FrontierTable:
    """A table with a fresh id: UTC timestamp plus a short content hash (ids sort by creation time)."""
    rows_t = tuple(rows)
    now = _dt.datetime.now(_dt.UTC)
    digest = hashlib.sha256(
        json.dumps([fingerprint.to_dict(), [r.to_dict() for r in rows_t]], sort_keys=True).encode()
    ).hexdigest()[:8]
    return FrontierTable(
        table_id=f"{now.strftime('%Y%m%dT%H%M%S%fZ')}-{digest}",
        created_at=now.isoformat(timespec="seconds").replace("+00:00", "Z"),
        fingerprint=fingerprint,
        rows=rows_t,
        notes=notes,
    )
