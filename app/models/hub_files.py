"""Hub metadata for downloads: endpoint, token and offline mode now, LFS hashes, file HEADs, clear errors."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from app.models.download_errors import DownloadError, HubOffline
from app.models.names import is_safe

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


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


def hub_error(e: Exception, repo: str, filename: str | None = None) -> DownloadError:
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
        raise hub_error(e, repo) from e
    # A hostile repo can list traversal names; never offer them (the quant-tag lookup would pick them first).
    return [s.rfilename for s in info.siblings or [] if is_safe(s.rfilename)]


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
        raise hub_error(e, repo, filename) from e
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
