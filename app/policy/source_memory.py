"""Source memory on disk, beside the calibration tables: per (model pair, device) and content class, per source.

One JSON file per calibration folder (`source_memory.json`; the folder is already per target/draft pair), holding an
entry per engine identity (the fingerprint's target and draft hashes plus backend and device, since acceptance
belongs to the pair and tokens/ms to the device) and, inside it, a map key -> source -> ArmMemory, where the key is a
class or a sub-class's "copy_edit/near_copy" (app.policy.content_class.class_key). Writes are
atomic (store.atomic_write_text) and throttled: at most one per `min_interval_s`, at the end of a request, plus a
final flush at close. A damaged file is moved aside with a note and the memory starts empty: never a crash.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from app.policy.fingerprint import Fingerprint
from app.policy.store import atomic_write_text
from app.speculative.memory import ArmMemory, ArmOutcome, blend

log = logging.getLogger(__name__)

MEMORY_FILE = "source_memory.json"
SCHEMA_VERSION = 1
MAX_CLASS_NAME = 64


def memory_identity(fp: Fingerprint) -> str:
    """The key of one (model pair, device): what acceptance and cost belong to."""
    return f"{fp.target_sha256}+{fp.draft_sha256 or '-'}@{fp.backend}:{fp.device}"


def parse_memory(data: Any) -> dict[str, dict[str, dict[str, ArmMemory]]]:
    """identity -> class -> source -> ArmMemory; raises ValueError for anything that is not this file's shape."""
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"not a source memory file of schema version {SCHEMA_VERSION}")
    pairs = data.get("pairs")
    if not isinstance(pairs, dict):
        raise ValueError("'pairs' must be an object")
    out: dict[str, dict[str, dict[str, ArmMemory]]] = {}
    for ident, classes in pairs.items():
        if not isinstance(classes, dict):
            raise ValueError(f"pair {ident!r}: classes must be an object")
        out[ident] = {}
        for cls, sources in classes.items():
            if not isinstance(sources, dict) or len(cls) > MAX_CLASS_NAME:
                raise ValueError(f"class {cls!r}: must map source names to their memory")
            out[ident][cls] = {str(src): ArmMemory.from_dict(m) for src, m in sources.items()}
    return out


class SourceMemoryStore:
    """The remembered source statistics of one engine identity; loads once, blends each request in, saves atomically."""

    def __init__(self, path: Path, identity: str, min_interval_s: float = 1.0) -> None:
        self.path = path
        self.identity = identity
        self.min_interval_s = min_interval_s
        self.note: str | None = None  # set when a damaged file was moved aside (shown in responses and logs)
        self.writes = 0
        self._dirty = False
        self._last_write = -float("inf")
        self._all = self._load()

    def _load(self) -> dict[str, dict[str, dict[str, ArmMemory]]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self.note = f"source memory {self.path} unreadable ({exc}); starting empty"
            log.warning("%s", self.note)
            return {}
        try:
            return parse_memory(json.loads(raw))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
            try:
                self.path.replace(aside)
                where = f"moved aside to {aside.name}"
            except OSError as move_exc:
                where = f"could not be moved aside ({move_exc})"
            self.note = f"source memory {self.path.name} was damaged ({exc}); {where}; starting empty"
            log.warning("%s", self.note)
            return {}

    def get(self, content_class: str) -> dict[str, ArmMemory]:
        return dict(self._all.get(self.identity, {}).get(content_class, {}))

    def classes(self) -> dict[str, dict[str, ArmMemory]]:
        return {c: dict(s) for c, s in self._all.get(self.identity, {}).items()}

    def record(self, keys: str | tuple[str, ...], outcomes: dict[str, ArmOutcome], now: float | None = None) -> None:
        """Blend one finished request into the memory under each of `keys` (a class, or a sub-class's key and its
        class's: app.policy.content_class.class_key), and write if the last write is old enough."""
        if not outcomes:
            return
        for key in (keys,) if isinstance(keys, str) else keys:
            sources = self._all.setdefault(self.identity, {}).setdefault(key[:MAX_CLASS_NAME], {})
            for name, outcome in outcomes.items():
                if outcome.idle and name not in sources:
                    continue
                sources[name] = blend(sources.get(name), outcome)
        self._dirty = True
        t = time.monotonic() if now is None else now
        if t - self._last_write >= self.min_interval_s:
            self._write(t)

    def flush(self) -> None:
        if self._dirty:
            self._write(time.monotonic())

    def _write(self, t: float) -> None:
        doc = {
            "schema_version": SCHEMA_VERSION,
            "pairs": {
                ident: {c: {s: m.to_dict() for s, m in srcs.items()} for c, srcs in classes.items()}
                for ident, classes in self._all.items()
            },
        }
        try:
            atomic_write_text(self.path, json.dumps(doc, indent=1))
        except OSError as exc:  # a full or read-only disk costs the memory, never the request
            log.warning("could not save source memory to %s: %s", self.path, exc)
            return
        self._dirty = False
        self._last_write = t
        self.writes += 1
