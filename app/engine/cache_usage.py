"""The prompt caches on disk across every model: what each folder holds, clearing them, one cap on their total."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TOTAL_MIB = 6144  # every identity's folder together (each keeps at most cache_disk.DEFAULT_MAX_BYTES)


@dataclass(frozen=True)
class CacheFolder:
    """One identity's saved states: `label` names the model (and draft) it was written for ("" before labels were
    written), `used` is when it was last saved (its index's mtime), `size` its bytes on disk."""

    path: Path
    label: str
    size: int
    states: int
    used: float


def _describe(folder: Path) -> CacheFolder | None:
    index = folder / "index.json"
    try:
        used = index.stat().st_mtime
        data = json.loads(index.read_text())
    except (OSError, ValueError):
        return None  # a save in progress (its temp folder) or a damaged one: not listed, never removed
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    label = str(data.get("label", "")) if isinstance(data, dict) else ""
    states = len(data.get("entries", [])) if isinstance(data, dict) else 0
    return CacheFolder(folder, label, size, states, used)


def folders(root: Path) -> list[CacheFolder]:
    """Every identity's folder under `root`, most recently used first."""
    if not root.is_dir():
        return []
    found = [d for d in (_describe(p) for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if d]
    return sorted(found, key=lambda f: f.used, reverse=True)


def clear(root: Path, model: str | None = None) -> list[CacheFolder]:
    """Remove every folder, or those whose label contains `model` (a file name or part of one); returns them."""
    gone = [f for f in folders(root) if model is None or model.lower() in f.label.lower()]
    for f in gone:
        shutil.rmtree(f.path, ignore_errors=True)
    return gone


def enforce_total(root: Path, max_bytes: int, keep: Path | None = None) -> list[CacheFolder]:
    """Remove the least recently used folders until all of them fit `max_bytes` (`keep`, the one just written, stays
    whatever its size); returns what was removed."""
    present = folders(root)
    total = sum(f.size for f in present)
    gone: list[CacheFolder] = []
    for f in reversed(present):  # least recently used first
        if total <= max_bytes:
            break
        if keep is not None and f.path == keep:
            continue
        shutil.rmtree(f.path, ignore_errors=True)
        total -= f.size
        gone.append(f)
    return gone
