"""The errors a model download reports; every message is meant for the user."""

from __future__ import annotations


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
