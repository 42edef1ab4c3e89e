"""Source memory on disk, beside the calibration tables: per (model pair, device) and content class, per source.

One JSON file per calibration folder (`source_memory.json`; the folder is already per target/draft pair), holding an
entry per engine identity (the fingerprint's target and draft hashes plus backend and device, since acceptance
belongs to the pair and tokens/ms to the device) and, inside it, a map key -> source -> ArmMemory, where the key is a
class or a sub-class's "copy_edit/near_copy" (app.policy.content_class.class_key). Writes are
atomic (store.atomic_write_text) and throttled: at most one per `min_interval_s`, at the end of a request, plus a
final flush at close. A damaged file is moved aside with a note and the memory starts empty: never a crash.

Beside the sources, the file keeps each engine's verify cost table (ms per verify batch size, `verify_ms`, keyed by
cost_identity: the target, device and the runtime settings that change a decode's time). The cost stop learns batch
sizes one at a time, so a session that starts from nothing drafts shallow at first and pays once for every size it
tries, a device's dear ones (a kernel cliff) included; a restarted engine starts from the sizes measured last time.
It also keeps each pair's draft-model prefill speed (`draft_prefill`, the decayed [tokens, ms] sums of its catch-up
prefills, keyed by memory identity), so a restarted engine can weigh a draft's catch-up on its first long prompt
(DynamicDraftPolicy.weigh_catch_up) and a short prefill after the restart does not outweigh the calibration's long ones.
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
MAX_VERIFY_ROWS = 4096  # far above any draft allocation: a larger batch size in the file is damage
WRITE_INTERVAL_S = 1.0  # at most one write a second: many short requests must not each rewrite the file


def memory_identity(fp: Fingerprint) -> str:
    """The key of one (model pair, device): what acceptance and cost belong to."""
    return f"{fp.target_sha256}+{fp.draft_sha256 or '-'}@{fp.backend}:{fp.device}"


def cost_identity(fp: Fingerprint) -> str:
    """The key of one verify cost table: the target on this device with the settings that change a decode's ms (the
    draft model does not: a verify runs the target alone)."""
    return (
        f"{fp.target_sha256}@{fp.backend}:{fp.device}|{fp.llama_build}|ngl={fp.n_gpu_layers}|threads={fp.n_threads}"
        f"|fa={fp.flash_attn}"
    )


def parse_verify_costs(data: Any) -> dict[str, dict[int, float]]:
    """cost identity -> batch size -> ms, from the file's optional "verify_ms"; raises ValueError on anything else."""
    raw = data.get("verify_ms", {})
    if not isinstance(raw, dict):
        raise ValueError("'verify_ms' must be an object")
    out: dict[str, dict[int, float]] = {}
    for ident, table in raw.items():
        if not isinstance(table, dict):
            raise ValueError(f"verify costs {ident!r}: must map batch sizes to ms")
        out[ident] = {}
        for b, ms in table.items():
            if not (isinstance(b, str) and b.isdigit() and 1 <= int(b) <= MAX_VERIFY_ROWS):
                raise ValueError(f"verify costs {ident!r}: batch size {b!r} is not in 1..{MAX_VERIFY_ROWS}")
            if isinstance(ms, bool) or not isinstance(ms, int | float) or not 0.0 < ms < 1e7:
                raise ValueError(f"verify costs {ident!r}: {b} rows must cost a positive number of ms")
            out[ident][int(b)] = float(ms)
    return out


def parse_prefill_sums(data: Any) -> dict[str, dict[str, tuple[float, float]]]:
    """identity -> source -> (tokens, ms) of its prefills, from the file's optional "draft_prefill"."""
    raw = data.get("draft_prefill", {})
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ValueError("'draft_prefill' must map identities to {source: [tokens, ms]}")
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for ident, sums in raw.items():
        for src, pair in sums.items():
            ok = isinstance(pair, list) and len(pair) == 2
            ok = ok and all(not isinstance(x, bool) and isinstance(x, int | float) and 0.0 < x < 1e12 for x in pair)
            if not ok:
                raise ValueError(f"draft prefill {ident!r}/{src!r} must be [tokens, ms], both positive")
            out.setdefault(ident, {})[str(src)] = (float(pair[0]), float(pair[1]))
    return out


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

    def __init__(
        self, path: Path, identity: str, min_interval_s: float = WRITE_INTERVAL_S, costs: str | None = None
    ) -> None:
        """`costs`: this engine's cost identity (cost_identity), under which its verify cost table is kept."""
        self.path = path
        self.identity = identity
        self.cost_identity = costs
        self.min_interval_s = min_interval_s
        self.note: str | None = None  # set when a damaged file was moved aside (shown in responses and logs)
        self.writes = 0
        self._dirty = False
        self._last_write = -float("inf")
        self._costs: dict[str, dict[int, float]] = {}
        self._prefill: dict[str, dict[str, tuple[float, float]]] = {}
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
            data = json.loads(raw)
            pairs = parse_memory(data)
            self._costs = parse_verify_costs(data)
            self._prefill = parse_prefill_sums(data)
            return pairs
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
        self._changed(now)

    def verify_costs(self) -> dict[int, float]:
        """This engine's remembered verify ms per batch size (empty without a cost identity or a table)."""
        return dict(self._costs.get(self.cost_identity, {})) if self.cost_identity else {}

    def record_verify_costs(self, table: dict[int, float], now: float | None = None) -> None:
        """Keep the session's verify cost table (written with the next write, or at flush)."""
        if not self.cost_identity or not table:
            return
        self._costs[self.cost_identity] = {b: ms for b, ms in table.items() if 1 <= b <= MAX_VERIFY_ROWS and ms > 0}
        self._changed(now)

    def prefill_sums(self, source: str) -> tuple[float, float] | None:
        """The draft source's remembered (tokens, ms) prefill sums on this pair and device (None if never measured)."""
        return self._prefill.get(self.identity, {}).get(source)

    def record_prefill_sums(self, source: str, sums: tuple[float, float], now: float | None = None) -> None:
        """Keep a draft source's prefill sums (written with the next write, or at flush)."""
        if sums[0] > 0 and sums[1] > 0 and self.prefill_sums(source) != sums:
            self._prefill.setdefault(self.identity, {})[source] = sums
            self._changed(now)

    def _changed(self, now: float | None) -> None:
        """Something to save: write now if the last write is old enough, else at the next one (or the flush)."""
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
            "verify_ms": {
                ident: {str(b): round(ms, 4) for b, ms in sorted(table.items())} for ident, table in self._costs.items()
            },
            "draft_prefill": {i: {s: list(p) for s, p in by.items()} for i, by in self._prefill.items()},
        }
        try:
            atomic_write_text(self.path, json.dumps(doc, indent=1))
        except OSError as exc:  # a full or read-only disk costs the memory, never the request
            log.warning("could not save source memory to %s: %s", self.path, exc)
            return
        self._dirty = False
        self._last_write = t
        self.writes += 1
