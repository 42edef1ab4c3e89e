"""Hugging Face downloads with progress, cancel, resume across restarts, disk check, sha256 check and split shards."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from app.models.inspection import shard_names

PART_SUFFIX = ".part"
META_SUFFIX = ".part.json"
MARKER_SUFFIX = ".sha256"
DEFAULT_RESERVE = 256 * 1024 * 1024  # leave room for logs, caches and the OS after a large download
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_PROGRESS_INTERVAL = 0.1  # seconds between callbacks; a GUI can't draw faster than this anyway
_PROGRESS_STEP = 4 * 1024 * 1024  # ...unless this many bytes arrived since the last one


class DownloadError(RuntimeError):
    """A download that could not be started or finished; the message is meant for the user."""


class DownloadCancelled(DownloadError):
    """Cancelled by the caller; the partial file is kept so the next pull resumes it."""


class NotEnoughSpace(DownloadError):
    """Refused before writing anything: the disk can't hold the files."""


class ChecksumMismatch(DownloadError):
    """The finished file's sha256 is not the expected one; the file has been deleted."""


class HubOffline(DownloadError):
    """HF_HUB_OFFLINE is set, or the Hub can't be reached."""


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
DiskFree = Callable[[Path], int]


class CancelToken:
    """Thread-safe cancel flag: the GUI's Cancel button sets it, the download loop checks it on every chunk."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


@dataclass(frozen=True)
class RemoteFile:
    """What the Hub said about one file before downloading it."""

    repo: str
    filename: str
    revision: str
    url: str  # where the bytes are (a CDN location after the Hub's redirect)
    size: int | None
    etag: str | None
    commit: str | None
    expected_sha256: str | None
    sha256_source: str  # "catalog", "hub-lfs", "etag" or "none"


@dataclass(frozen=True)
class FileResult:
    """One finished file and how far its integrity could be checked."""

    path: Path
    size: int
    sha256: str
    verified: bool
    verify_note: str
    resumed_from: int = 0
    skipped: bool = False  # already complete on disk


@dataclass
class DownloadResult:
    """All files of a model; `path` is what llama.cpp should open (the first shard of a split model)."""

    path: Path
    files: list[FileResult] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return all(f.verified for f in self.files)


# --- environment ----------------------------------------------------------------------------------------------


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def is_offline() -> bool:
    """HF_HUB_OFFLINE read now (huggingface_hub reads it once at import; the GUI may toggle it later)."""
    if _truthy(os.environ.get("HF_HUB_OFFLINE")):
        return True
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def hub_endpoint(endpoint: str | None = None) -> str:
    """Explicit endpoint, else HF_ENDPOINT now, else what huggingface_hub resolved at import."""
    if endpoint:
        return endpoint.rstrip("/")
    env = os.environ.get("HF_ENDPOINT")
    if env:
        return env.rstrip("/")
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def hub_token(token: str | None = None) -> str | None:
    """Explicit token, else HF_TOKEN now; None lets huggingface_hub use a stored `hf auth login` token."""
    return token or os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None


def default_disk_free(path: Path) -> int:
    """Free bytes on the filesystem that will hold `path` (the nearest existing parent, as it may not exist yet)."""
    for p in (path, *path.parents):
        if p.exists():
            return shutil.disk_usage(p).free
    return shutil.disk_usage(Path.cwd()).free


def local_dir_for(repo: str, models_dir: Path) -> Path:
    """models/<owner>/<name>/ keeps files of different repos apart even when they share a file name."""
    owner, _, name = repo.partition("/")
    return models_dir / owner / name


# --- hashing and markers -----------------------------------------------------------------------------------------


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


# --- Hub metadata ------------------------------------------------------------------------------------------------


def _hub_error(e: Exception, repo: str, filename: str | None = None) -> DownloadError:
    """Turn huggingface_hub/httpx errors into one clear sentence."""
    from huggingface_hub import errors

    what = f"{repo}:{filename}" if filename else repo
    if isinstance(e, errors.OfflineModeIsEnabled):
        return HubOffline(f"{what}: offline mode (HF_HUB_OFFLINE) is on; only local models are available")
    if isinstance(e, errors.GatedRepoError):
        return DownloadError(
            f"{repo} is gated: accept its licence on the Hub, then set HF_TOKEN to a token with access"
        )
    if isinstance(e, errors.RepositoryNotFoundError):
        return DownloadError(f"{repo}: repository not found (or private: set HF_TOKEN)")
    if isinstance(e, errors.RevisionNotFoundError):
        return DownloadError(f"{what}: revision not found")
    if isinstance(e, errors.HfHubHTTPError):
        status = e.response.status_code if e.response is not None else None
        if status == 404:
            return DownloadError(f"{what}: file not found in the repository")
        if status in (401, 403):
            return DownloadError(f"{what}: access denied (HTTP {status}); set HF_TOKEN to a token with access")
        return DownloadError(f"{what}: Hub error HTTP {status}: {e}")
    import httpx

    if isinstance(e, httpx.TransportError):
        return HubOffline(f"{what}: cannot reach the Hub ({type(e).__name__}: {e}); check the network or HF_ENDPOINT")
    return DownloadError(f"{what}: {type(e).__name__}: {e}")


def hub_lfs_hashes(
    repo: str, revision: str = "main", *, endpoint: str | None = None, token: str | None = None
) -> dict[str, tuple[int | None, str]]:
    """filename -> (size, sha256) for the repo's LFS files, from the model-info API; {} if it can't be had."""
    from huggingface_hub import HfApi

    try:
        info = HfApi(endpoint=hub_endpoint(endpoint), token=hub_token(token)).model_info(
            repo, revision=revision, files_metadata=True
        )
    except Exception:  # noqa: BLE001 - a missing hash source only weakens verification, it must not stop the pull
        return {}
    out: dict[str, tuple[int | None, str]] = {}
    for s in info.siblings or []:
        if s.lfs is not None and _SHA256_RE.match(str(s.lfs.sha256)):
            out[s.rfilename] = (s.lfs.size, s.lfs.sha256)
    return out


def list_repo_files(
    repo: str, revision: str = "main", *, endpoint: str | None = None, token: str | None = None
) -> list[str]:
    """File names in a repo (for resolving quant tags); raises DownloadError with a clear reason."""
    if is_offline():
        raise HubOffline(f"{repo}: offline mode (HF_HUB_OFFLINE) is on; can't list the repository")
    from huggingface_hub import HfApi

    try:
        info = HfApi(endpoint=hub_endpoint(endpoint), token=hub_token(token)).model_info(repo, revision=revision)
    except Exception as e:  # noqa: BLE001
        raise _hub_error(e, repo) from e
    return [s.rfilename for s in info.siblings or []]


def remote_file(
    repo: str,
    filename: str,
    revision: str = "main",
    *,
    endpoint: str | None = None,
    token: str | None = None,
    expected_sha256: str | None = None,
    lfs: dict[str, tuple[int | None, str]] | None = None,
) -> RemoteFile:
    """HEAD the file on the Hub: size, ETag, commit and the final (CDN) location."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    ep = hub_endpoint(endpoint)
    url = hf_hub_url(repo, filename, revision=revision, endpoint=ep)
    try:
        meta = get_hf_file_metadata(url, token=hub_token(token))
    except Exception as e:  # noqa: BLE001
        raise _hub_error(e, repo, filename) from e
    size = meta.size
    sha, source = expected_sha256, "catalog" if expected_sha256 else "none"
    if sha is None and lfs and filename in lfs:
        lfs_size, sha = lfs[filename]
        source = "hub-lfs"
        size = size if size is not None else lfs_size
    if sha is None and meta.etag and _SHA256_RE.match(meta.etag):
        # For LFS files the Hub's X-Linked-Etag is the file's sha256; a git blob id (40 hex) is not.
        sha, source = meta.etag, "etag"
    return RemoteFile(repo, filename, revision, meta.location, size, meta.etag, meta.commit_hash, sha, source)


# --- transfer ----------------------------------------------------------------------------------------------------


class _SilentBar:
    """Stands in for huggingface_hub's tqdm bar: we report progress ourselves, through the file wrapper."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def update(self, n: float | None = 1) -> None:
        pass

    def __enter__(self) -> _SilentBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _Meter:
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


class _ProgressFile:
    """File wrapper handed to huggingface_hub's http_get: counts bytes, reports progress, raises on cancel."""

    def __init__(
        self,
        f: Any,
        meter: _Meter,
        cancel: CancelToken | None,
        filename: str,
        index: int,
        start: int,
        total: int | None,
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


def _http_get_kwargs() -> dict[str, Any]:
    from huggingface_hub.file_download import http_get

    params = inspect.signature(http_get).parameters
    return {"tqdm_class": _SilentBar} if "tqdm_class" in params else {}


def _same_host(a: str, b: str) -> bool:
    return (urlparse(a).hostname or "").lower() == (urlparse(b).hostname or "").lower()


def _load_meta(meta_path: Path) -> dict[str, Any]:
    try:
        data = json.loads(meta_path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _resume_offset(part: Path, meta_path: Path, rf: RemoteFile) -> int:
    """Bytes of `part` we may keep: only if it was started for the very same remote version (ETag and size)."""
    if not part.is_file():
        return 0
    meta = _load_meta(meta_path)
    have = part.stat().st_size
    same = meta.get("etag") == rf.etag and meta.get("size") == rf.size and rf.etag is not None
    if not same or (rf.size is not None and have > rf.size):
        part.unlink()
        return 0
    return have


def _transfer(
    rf: RemoteFile, dest: Path, meter: _Meter, index: int, cancel: CancelToken | None, token: str | None, endpoint: str
) -> int:
    """Download rf into dest.part (resuming if possible); returns the resumed offset."""
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    part = dest.with_name(dest.name + PART_SUFFIX)
    meta_path = dest.with_name(dest.name + META_SUFFIX)
    start = _resume_offset(part, meta_path, rf)
    meta_path.write_text(
        json.dumps(
            {
                "repo": rf.repo,
                "filename": rf.filename,
                "revision": rf.revision,
                "commit": rf.commit,
                "etag": rf.etag,
                "size": rf.size,
            }
        )
    )
    headers = build_hf_headers(token=hub_token(token))
    if not _same_host(rf.url, endpoint):
        # A signed CDN URL must not receive the user's Hub token.
        headers.pop("authorization", None)
        headers.pop("Authorization", None)
    if cancel is not None and cancel.cancelled:
        raise DownloadCancelled(f"{rf.filename}: cancelled before start")
    with open(part, "ab") as f:
        wrapper = _ProgressFile(f, meter, cancel, rf.filename, index, start, rf.size)
        meter.emit(rf.filename, index, start, rf.size, force=True)
        try:
            http_get(
                rf.url,
                wrapper,  # type: ignore[arg-type]  # a file-like wrapper: http_get only calls write()
                resume_size=start,
                headers=headers,
                expected_size=rf.size,
                **_http_get_kwargs(),
            )
        except DownloadError:
            raise
        except OSError as e:
            # http_get's size consistency check; the partial stays for a resume.
            raise DownloadError(f"{rf.filename}: {e}") from e
        except Exception as e:  # noqa: BLE001
            raise _hub_error(e, rf.repo, rf.filename) from e
    return start


def _verify_and_finish(rf: RemoteFile, dest: Path, meter: _Meter, index: int) -> tuple[str, bool, str]:
    part = dest.with_name(dest.name + PART_SUFFIX)
    meta_path = dest.with_name(dest.name + META_SUFFIX)
    size = part.stat().st_size
    meter.emit(rf.filename, index, size, rf.size, force=True, phase="verify")
    digest = sha256_file(part)
    if rf.expected_sha256 is not None and digest != rf.expected_sha256:
        part.unlink(missing_ok=True)
        meta_path.unlink(missing_ok=True)
        raise ChecksumMismatch(
            f"{rf.filename}: sha256 {digest} does not match the expected {rf.expected_sha256} "
            f"(from {rf.sha256_source}); the downloaded file was deleted"
        )
    os.replace(part, dest)
    meta_path.unlink(missing_ok=True)
    write_marker(dest, digest)
    if rf.expected_sha256 is None:
        return digest, False, "could not be verified: no sha256 in the catalog and none reported by the Hub"
    return digest, True, f"sha256 verified ({rf.sha256_source})"


def _complete_local(dest: Path, rf: RemoteFile) -> tuple[str, bool, str] | None:
    """(sha, verified, note) if dest is already the right file, so nothing needs downloading."""
    if not dest.is_file() or (rf.size is not None and dest.stat().st_size != rf.size):
        return None
    sha = read_marker(dest) or sha256_file(dest)
    if rf.expected_sha256 is not None and sha != rf.expected_sha256:
        return None
    write_marker(dest, sha)
    if rf.expected_sha256 is None:
        return sha, False, "already present; could not be verified (no sha256 known)"
    return sha, True, f"already present, sha256 verified ({rf.sha256_source})"


def _offline_result(dest_dir: Path, filenames: list[str], expected: dict[str, str]) -> DownloadResult:
    """In offline mode a pull succeeds only if every file is already complete on disk."""
    files = []
    for name in filenames:
        dest = dest_dir / name
        sha = read_marker(dest)
        if sha is None:
            raise HubOffline(
                f"offline mode (HF_HUB_OFFLINE) is on and {name} is not downloaded yet; "
                "unset HF_HUB_OFFLINE or use a local model"
            )
        want = expected.get(name)
        ok = want is not None and sha == want
        note = "already present, sha256 verified (catalog)" if ok else "already present (offline, not re-checked)"
        files.append(FileResult(dest, dest.stat().st_size, sha, ok, note, skipped=True))
    return DownloadResult(path=files[0].path, files=files)


def download_files(
    repo: str,
    filenames: list[str],
    dest_dir: Path,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: str | None = None,
    expected_sha256: dict[str, str] | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    disk_free: DiskFree | None = None,
    reserve: int = DEFAULT_RESERVE,
) -> DownloadResult:
    """Download files of one repo into dest_dir (keeping their repo paths); returns the first file as `path`.

    Every file is HEADed and the disk checked before the first byte is written. Partial files (`*.part`, with
    the ETag in `*.part.json`) survive cancels, crashes and restarts and are resumed with an HTTP Range request.
    """
    if not filenames:
        raise DownloadError(f"{repo}: no files to download")
    expected = expected_sha256 or {}
    if is_offline():
        return _offline_result(dest_dir, filenames, expected)
    ep = hub_endpoint(endpoint)
    missing_hash = [f for f in filenames if f not in expected]
    lfs = hub_lfs_hashes(repo, revision, endpoint=ep, token=token) if missing_hash else {}
    remotes = [
        remote_file(repo, f, revision, endpoint=ep, token=token, expected_sha256=expected.get(f), lfs=lfs)
        for f in filenames
    ]

    # Space check first, for all files at once: a split model that can't fit is refused before any shard starts.
    need = 0
    done: dict[str, tuple[str, bool, str]] = {}
    for rf in remotes:
        dest = dest_dir / rf.filename
        local = _complete_local(dest, rf)
        if local is not None:
            done[rf.filename] = local
            continue
        if rf.size is None:
            continue  # unknown size: http_get learns it from the response; nothing to check up front
        part = dest.with_name(dest.name + PART_SUFFIX)
        meta = _load_meta(dest.with_name(dest.name + META_SUFFIX))
        have = part.stat().st_size if part.is_file() and meta.get("etag") == rf.etag else 0
        need += max(0, rf.size - have)
    free = (disk_free or default_disk_free)(dest_dir)
    if need and free < need + reserve:
        raise NotEnoughSpace(
            f"{repo}: needs {need / 1e9:.2f} GB (+{reserve / 1e9:.2f} GB reserve) in {dest_dir}, "
            f"only {free / 1e9:.2f} GB free; nothing was written"
        )

    sizes = [rf.size for rf in remotes]
    overall_total = None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)
    meter = _Meter(progress, overall_total, len(remotes))
    results: list[FileResult] = []
    for i, rf in enumerate(remotes, start=1):
        dest = dest_dir / rf.filename
        if rf.filename in done:
            sha, ok, note = done[rf.filename]
            size = dest.stat().st_size
            results.append(FileResult(dest, size, sha, ok, note, skipped=True))
            meter.emit(rf.filename, i, size, rf.size, force=True, phase="done")
            meter.done_before += size
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        start = _transfer(rf, dest, meter, i, cancel, token, ep)
        sha, ok, note = _verify_and_finish(rf, dest, meter, i)
        size = dest.stat().st_size
        results.append(FileResult(dest, size, sha, ok, note, resumed_from=start))
        meter.emit(rf.filename, i, size, rf.size, force=True, phase="done")
        meter.done_before += size
    return DownloadResult(path=results[0].path, files=results)


def download_model(repo: str, filename: str, dest_dir: Path, **kwargs: Any) -> DownloadResult:
    """Download a model file; for a split GGUF (any shard named) all shards, returning the first shard's path."""
    return download_files(repo, shard_names(filename), dest_dir, **kwargs)
