"""sha256 of model files and the '<sha256> <size> <mtime_ns>' marker that lets a later look-up skip re-hashing."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path

MARKER_SUFFIX = ".sha256"
PROGRESS_BYTES = 64 << 20  # how often sha256_file reports: 64 MiB is ~30-100 ms of hashing


class HashCancelled(Exception):
    """sha256_file stopped: its `cancel` event was set."""


def sha256_file(
    path: Path,
    chunk: int = 1 << 22,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> str:
    """The file's sha256; `progress(done, total)` after every 64 MiB read (an 18.5 GB model takes 10-40 s), and
    HashCancelled as soon as `cancel` is set."""
    h = hashlib.sha256()
    total, done, reported = path.stat().st_size, 0, 0
    with open(path, "rb") as f:
        while block := f.read(chunk):
            if cancel is not None and cancel.is_set():
                raise HashCancelled(f"checking {path.name} was cancelled")
            h.update(block)
            done += len(block)
            if progress is not None and (done - reported >= PROGRESS_BYTES or done == total):
                progress(done, total)
                reported = done
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
