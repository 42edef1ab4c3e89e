"""sha256 of model files and the '<sha256> <size> <mtime_ns>' marker that lets a later look-up skip re-hashing."""

from __future__ import annotations

import hashlib
from pathlib import Path

MARKER_SUFFIX = ".sha256"


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _marker(path: Path) -> Path:
    return path.with_name(path.name + MARKER_SUFFIX)


def write_marker(path: Path, sha: str) -> None:
    """Record '<sha256> <size> <mtime_ns>' (downloads and packaged models alike) so a look-up skips re-hashing."""
    st = path.stat()
    _marker(path).write_text(f"{sha} {st.st_size} {st.st_mtime_ns}\n")


def read_marker(path: Path) -> str | None:
    """The sha256 recorded for `path` if the file is unchanged since, else None."""
    m = _marker(path)
    if not (path.is_file() and m.is_file()):
        return None
    parts = m.read_text().split()
    st = path.stat()
    if len(parts) == 3 and parts[1] == str(st.st_size) and parts[2] == str(st.st_mtime_ns):
        return parts[0]
    return None
