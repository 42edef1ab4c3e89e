"""Hub file names that are safe to join to the models folder: no absolute, `..`, backslash, drive or UNC names."""

from __future__ import annotations

import re
from pathlib import Path

_DRIVE = re.compile(r"^[A-Za-z]:")


def unsafe_reason(name: str) -> str | None:
    """Why `name` (a repo-relative file name from the Hub) must not be written to disk, or None when it is safe.

    Checked for every platform at once: a listing that is harmless on Linux (a backslash, `C:x`) escapes on Windows.
    """
    if not name or name != name.strip():
        return "empty, or surrounded by spaces"
    if any(ord(c) < 32 for c in name):
        return "contains control characters"
    if "\\" in name:
        return "contains a backslash (a path separator on Windows)"
    if name.startswith("/"):
        return "is an absolute path" if not name.startswith("//") else "is a network (UNC) path"
    if _DRIVE.match(name) or ":" in name:
        return "names a drive or an alternate data stream (':')"
    parts = name.split("/")
    if ".." in parts:
        return "climbs out of the folder ('..')"
    if any(p in ("", ".") for p in parts):
        return "has an empty or '.' path component"
    return None


def is_safe(name: str) -> bool:
    return unsafe_reason(name) is None


def contained(root: Path, name: str) -> Path:
    """root/name, after checking that it stays inside root even through existing symlinks (raises ValueError)."""
    reason = unsafe_reason(name)
    if reason is not None:
        raise ValueError(f"refusing the file name {name!r}: it {reason}")
    dest = root / name
    base = root.resolve()
    if not dest.resolve().is_relative_to(base):
        raise ValueError(f"refusing the file name {name!r}: it leads outside {root}")
    return dest
