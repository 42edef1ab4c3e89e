"""Download progress plumbing: reports, a cancel token, a smoothed meter, and the counting file wrapper."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.models.download_errors import DownloadCancelled

_PROGRESS_INTERVAL = 0.1  # seconds between callbacks; a GUI can't draw faster than this anyway
_PROGRESS_STEP = 4 * 1024 * 1024  # ...unless this many bytes arrived since the last one


@dataclass(frozen=True)
class Progress:
    """One progress report: bytes of the current file and of the whole set, speed and ETA."""

    filename: str
    file_index: int  # 1-based
    file_count: int
    downloaded: int  # bytes of this file on disk, including a resumed prefix
    total: int | None
    overall_downloaded: int
    overall_total: int | None
    speed: float  # bytes/s, smoothed
    eta: float | None  # seconds for the whole set
    phase: str = "download"  # "download" | "verify" | "done"


ProgressCallback = Callable[[Progress], None]


class CancelToken:
    """Thread-safe cancel flag: the GUI's Cancel button sets it, the download loop checks it on every chunk."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


class SilentBar:
    """Stands in for huggingface_hub's tqdm bar: we report progress ourselves, through the file wrapper."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def update(self, n: float | None = 1) -> None:
        pass

    def __enter__(self) -> SilentBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class Meter:
    """Speed (exponentially smoothed) and throttled progress callbacks across all files of one pull."""

    def __init__(self, callback: ProgressCallback | None, overall_total: int | None, file_count: int) -> None:
        self.callback = callback
        self.overall_total = overall_total
        self.file_count = file_count
        self.done_before = 0  # bytes of files finished earlier in this pull
        self.speed = 0.0
        self._last_t = time.monotonic()
        self._last_bytes = 0
        self._last_emit = 0.0
        self._last_overall = 0
        self._session_bytes = 0

    def emit(
        self,
        filename: str,
        index: int,
        downloaded: int,
        total: int | None,
        *,
        force: bool = False,
        phase: str = "download",
    ) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        overall = self.done_before + downloaded
        # Time-throttled, but never silent across a big step: huggingface_hub writes 10 MiB chunks, and a fast
        # link delivers several within one interval; each should reach the GUI (and its Cancel check).
        if not force and now - self._last_emit < _PROGRESS_INTERVAL and overall - self._last_overall < _PROGRESS_STEP:
            return
        self._last_emit = now
        self._last_overall = overall
        remaining = None if self.overall_total is None else max(0, self.overall_total - overall)
        eta = remaining / self.speed if remaining is not None and self.speed > 0 else None
        self.callback(
            Progress(
                filename, index, self.file_count, downloaded, total, overall, self.overall_total, self.speed, eta, phase
            )
        )

    def add(self, n: int) -> None:
        self._session_bytes += n
        now = time.monotonic()
        dt = now - self._last_t
        if dt >= 0.2:
            inst = (self._session_bytes - self._last_bytes) / dt
            self.speed = inst if self.speed == 0 else 0.7 * self.speed + 0.3 * inst
            self._last_t, self._last_bytes = now, self._session_bytes


class ProgressFile:
    """File wrapper handed to huggingface_hub's http_get: counts bytes, reports progress, raises on cancel."""

    def __init__(
        self, f: Any, meter: Meter, cancel: CancelToken | None, filename: str, index: int, start: int, total: int | None
    ) -> None:
        self._f = f
        self._meter = meter
        self._cancel = cancel
        self._filename = filename
        self._index = index
        self.written = start
        self._total = total

    def write(self, data: bytes) -> int:
        if self._cancel is not None and self._cancel.cancelled:
            raise DownloadCancelled(f"{self._filename}: cancelled at {self.written} bytes; `pull` again to resume")
        n = self._f.write(data)
        self.written += len(data)
        self._meter.add(len(data))
        self._meter.emit(self._filename, self._index, self.written, self._total)
        return n

    # http_get rewinds and truncates when a server ignores our Range header; keep our count in step.
    def seek(self, offset: int, whence: int = 0) -> int:
        pos = self._f.seek(offset, whence)
        self.written = pos
        return pos

    def tell(self) -> int:
        return self._f.tell()

    def truncate(self, size: int | None = None) -> int:
        return self._f.truncate(size)

    def flush(self) -> None:
        self._f.flush()
