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


UNVERIFIED_TAG = "unverified"
UNVERIFIED_NOTE = (
    "NOT VERIFIED: could not be verified, no sha256 in the catalog and none reported by the Hub; corruption "
    "cannot be detected (only the GGUF layout is checked before loading)"
)


def write_marker(path: Path, sha: str, verified: bool = True) -> None:
    """Record '<sha256> <size> <mtime_ns>' (downloads and packaged models alike) so a look-up skips re-hashing.

    A file whose sha256 nobody vouched for gets a 4th word, so listings can say plainly that it is unverified.
    """
    st = path.stat()
    tag = "" if verified else f" {UNVERIFIED_TAG}"
    _marker(path).write_text(f"{sha} {st.st_size} {st.st_mtime_ns}{tag}\n")


def read_marker_state(path: Path) -> tuple[str, bool] | None:
    """(sha256, verified) recorded for `path` if the file is unchanged since, else None."""
    m = _marker(path)
    if not (path.is_file() and m.is_file()):
        return None
    parts = m.read_text().split()
    st = path.stat()
    if len(parts) in (3, 4) and parts[1] == str(st.st_size) and parts[2] == str(st.st_mtime_ns):
        return parts[0], parts[3:] != [UNVERIFIED_TAG]
    return None


def read_marker(path: Path) -> str | None:
    """The sha256 recorded for `path` if the file is unchanged since, else None."""
    state = read_marker_state(path)
    return state[0] if state else None
