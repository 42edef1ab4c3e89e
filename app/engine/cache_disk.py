"""The conversation cache on disk: saved states in a folder per engine identity, so a reopened chat starts warm."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.cache import MIB, Entry, restorable
from app.engine.cache_usage import enforce_total

log = logging.getLogger(__name__)

FORMAT = 1
DEFAULT_MAX_BYTES = 2048 * MIB  # written on every close: the most recent conversations, not the whole RAM budget


def identity_key(material: dict[str, Any]) -> str:
    """A short stable name for the identity (its folder name); the full material is kept inside and compared."""
    blob = json.dumps(material, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


@dataclass(frozen=True)
class DiskStore:
    """States saved under root/<identity key>/: an index (tokens, owner, order) and one file per state.

    The identity (model and draft file hashes, llama.cpp build, context size, KV types, flash attention) is what
    makes a state loadable: a folder written by another model, build or context size is never read.
    """

    root: Path
    identity: dict[str, Any]
    max_bytes: int = DEFAULT_MAX_BYTES
    label: str = ""  # the model (and draft) file names, for `dynadraft cache` (not part of the identity)
    total_max_bytes: int | None = None  # every identity's folder under root together (cache_usage.enforce_total)

    @property
    def folder(self) -> Path:
        return self.root / identity_key(self.identity)

    def load(self) -> list[Entry]:
        """The saved states for this identity; nothing (never an error) if absent, foreign or damaged."""
        index_path = self.folder / "index.json"
        try:
            index = json.loads(index_path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as e:
            log.warning("ignoring an unreadable prompt cache index %s: %s", index_path, e)
            return []
        if not isinstance(index, dict) or index.get("format") != FORMAT or index.get("identity") != self.identity:
            log.warning("ignoring a prompt cache written for another model, build or context: %s", self.folder)
            return []
        out: list[Entry] = []
        for i, item in enumerate(index.get("entries", [])):
            try:
                data = self._read(item)
                entry = Entry(str(item["owner"]), tuple(int(t) for t in item["tokens"]), data, used=i)
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("ignoring a damaged prompt cache state in %s: %s", self.folder, e)
                continue
            if isinstance(item.get("extra"), dict):  # absent in folders written before attachments existed
                try:
                    entry.extra = self._read(item["extra"])
                except (OSError, ValueError, KeyError, TypeError) as e:  # the state itself is sound: keep it
                    log.warning("ignoring a damaged attachment of a prompt cache state in %s: %s", self.folder, e)
            out.append(entry)
        return out

    def _read(self, item: dict[str, Any]) -> bytes:
        data = (self.folder / str(item["file"])).read_bytes()
        # llama.cpp cannot tell a damaged state from a short one: never hand it bytes we did not write.
        if len(data) != int(item["size"]) or hashlib.sha256(data).hexdigest() != item["sha256"]:
            raise ValueError("checksum mismatch")
        return data

    def save(self, entries: list[Entry]) -> None:
        """Replace this identity's folder with the most recent `entries` within max_bytes (stored least recently used
        first, so a load keeps the order)."""
        entries = restorable(entries, self.max_bytes)
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{identity_key(self.identity)}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        items = []
        for i, e in enumerate(sorted(entries, key=lambda e: e.used)):
            item: dict[str, Any] = {"owner": e.owner, "tokens": list(e.tokens)}
            item.update(_write(tmp / f"state-{i}.bin", e.data))
            if e.extra:  # an optional key: older builds read the folder and ignore it
                item["extra"] = _write(tmp / f"state-{i}.extra.bin", e.extra)
            items.append(item)
        index = {"format": FORMAT, "identity": self.identity, "label": self.label, "entries": items}
        (tmp / "index.json").write_text(json.dumps(index))
        old = self.folder.with_name(self.folder.name + f".{os.getpid()}.old")
        if self.folder.exists():
            os.replace(self.folder, old)
        os.replace(tmp, self.folder)
        shutil.rmtree(old, ignore_errors=True)
        if self.total_max_bytes is not None:
            for gone in enforce_total(self.root, self.total_max_bytes, keep=self.folder):
                log.info("prompt cache of %s removed to stay within the total cap", gone.label or gone.path.name)


def _write(path: Path, data: bytes) -> dict[str, Any]:
    path.write_bytes(data)
    return {"file": path.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def session_identity(config: Any, n_ctx: int, flash_attn: str) -> dict[str, Any]:
    """What a saved state depends on: the exact model files, the llama.cpp build and the memory's layout."""
    from app.engine.identity import cached_sha256, llama_build
    from app.runtime.llama import system_info

    return {
        "target_sha256": cached_sha256(config.model),
        "draft_sha256": cached_sha256(config.draft) if config.draft else None,
        "llama_build": llama_build(),
        "system_info": system_info(),
        "n_ctx": n_ctx,
        "type_k": config.type_k,
        "type_v": config.type_v,
        "flash_attn": flash_attn,
    }
