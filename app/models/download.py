"""Hugging Face model downloads: disk check, resume across restarts, sha256 check and split shards."""

from __future__ import annotations

import inspect
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from app.models.download_errors import ChecksumMismatch, DownloadCancelled, DownloadError, HubOffline, NotEnoughSpace
from app.models.download_progress import CancelToken, Meter, ProgressCallback, ProgressFile, SilentBar
from app.models.hub_files import RemoteFile, hub_endpoint, hub_error, hub_lfs_hashes, hub_token, is_offline, remote_file
from app.models.inspection import shard_names
from app.models.integrity import UNVERIFIED_NOTE, read_marker, sha256_file, write_marker
from app.models.names import contained, is_safe

PART_SUFFIX = ".part"
META_SUFFIX = ".part.json"
DEFAULT_RESERVE = 256 * 1024 * 1024  # leave room for logs, caches and the OS after a large download


DiskFree = Callable[[Path], int]


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


def default_disk_free(path: Path) -> int:
    """Free bytes on the filesystem that will hold `path` (the nearest existing parent, as it may not exist yet)."""
    for p in (path, *path.parents):
        if p.exists():
            return shutil.disk_usage(p).free
    return shutil.disk_usage(Path.cwd()).free


def local_dir_for(repo: str, models_dir: Path) -> Path:
    """models/<owner>/<name>/ keeps files of different repos apart even when they share a file name."""
    owner, _, name = repo.partition("/")
    if not (is_safe(owner) and is_safe(name)) or "/" in name:
        raise DownloadError(f"not a Hub repository id: {repo!r} (expected OWNER/NAME)")
    return models_dir / owner / name


def _http_get_kwargs() -> dict[str, Any]:
    from huggingface_hub.file_download import http_get

    params = inspect.signature(http_get).parameters
    return {"tqdm_class": SilentBar} if "tqdm_class" in params else {}


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
    rf: RemoteFile, dest: Path, meter: Meter, index: int, cancel: CancelToken | None, token: str | None, endpoint: str
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
        wrapper = ProgressFile(f, meter, cancel, rf.filename, index, start, rf.size)
        meter.emit(rf.filename, index, start, rf.size, force=True)
        try:
            http_get(
                rf.url,
                wrapper,  # type: ignore[arg-type]
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
            raise hub_error(e, rf.repo, rf.filename) from e
    return start


def _verify_and_finish(rf: RemoteFile, dest: Path, meter: Meter, index: int) -> tuple[str, bool, str]:
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
    write_marker(dest, digest, verified=rf.expected_sha256 is not None)
    if rf.expected_sha256 is None:
        return digest, False, UNVERIFIED_NOTE
    return digest, True, f"sha256 verified ({rf.sha256_source})"


def _complete_local(dest: Path, rf: RemoteFile) -> tuple[str, bool, str] | None:
    """(sha, verified, note) if dest is already the right file, so nothing needs downloading."""
    if not dest.is_file() or (rf.size is not None and dest.stat().st_size != rf.size):
        return None
    sha = read_marker(dest) or sha256_file(dest)
    if rf.expected_sha256 is not None and sha != rf.expected_sha256:
        return None
    write_marker(dest, sha, verified=rf.expected_sha256 is not None)
    if rf.expected_sha256 is None:
        return sha, False, "already present; NOT VERIFIED: could not be verified (no sha256 known)"
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
    for name in filenames:  # before any request: a name that escapes dest_dir never reaches the network or disk
        try:
            contained(dest_dir, name)
        except ValueError as e:
            raise DownloadError(f"{repo}: {e}") from None
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
    meter = Meter(progress, overall_total, len(remotes))
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
