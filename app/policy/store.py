"""Versioned frontier tables on disk: one immutable JSON file per calibration, plus an atomic "active" pointer.

Layout under `get_paths().calibration` (DYNADRAFT_HOME moves it)::

    tables/<table_id>.json   every table ever saved (history; never overwritten)
    active.json              {"schema_version": 1, "table_id": ...}: the table the engine should use

Every write goes to a temp file in the same folder and is moved into place with os.replace, so a crash leaves
either the old or the new file, never a torn one. Loading never raises for bad data: it returns a LoadResult
with a status and a human-readable message, which the caller shows.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.paths import get_paths
from app.policy.fingerprint import Fingerprint
from app.policy.schema import validate_pointer_json
from app.policy.table import SCHEMA_VERSION, FrontierTable

LoadStatus = Literal["ok", "missing", "corrupt", "stale"]

ACTIVE_FILE = "active.json"
TABLES_DIR = "tables"


@dataclass(frozen=True)
class LoadResult:
    """Outcome of loading the active table.

    status: "ok" (usable), "missing" (no active table), "corrupt" (unreadable, invalid JSON, wrong schema or
    fields; the file is left in place), "stale" (valid, but measured on a different fingerprint; `table` is still
    given for display, and a policy built from it reports `stale_table`). message: why, for the UI and logs.
    """

    status: LoadStatus
    message: str
    table: FrontierTable | None = None
    path: Path | None = None

    @property
    def usable(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class TableEntry:
    """One saved table in the history listing; `error` is set (and the other fields may be None) if unreadable."""

    table_id: str
    path: Path
    active: bool
    created_at: str | None
    fingerprint: Fingerprint | None
    rows: int
    error: str | None = None


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same folder + fsync + os.replace (same filesystem, so the rename is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class TableStore:
    """Saves, lists and loads frontier tables in one calibration folder."""

    def __init__(self, root: Path | None = None) -> None:
        """root: the calibration folder; defaults to `get_paths().calibration` (resolved now, so tests can set
        DYNADRAFT_HOME first)."""
        self.root = root if root is not None else get_paths().calibration

    @property
    def tables_dir(self) -> Path:
        return self.root / TABLES_DIR

    @property
    def active_path(self) -> Path:
        return self.root / ACTIVE_FILE

    def path_for(self, table_id: str) -> Path:
        if not table_id or "/" in table_id or "\\" in table_id or table_id.startswith("."):
            raise ValueError(f"bad table id {table_id!r}")
        return self.tables_dir / f"{table_id}.json"

    def save(self, table: FrontierTable, activate: bool = True) -> Path:
        """Write the table as a new history file (never replacing an existing one) and, by default, activate it."""
        path = self.path_for(table.table_id)
        if path.exists():
            raise FileExistsError(f"table {table.table_id} already saved at {path}")
        atomic_write_text(path, table.to_json())
        if activate:
            self.activate(table.table_id)
        return path

    def activate(self, table_id: str) -> None:
        """Point the active pointer at a saved table (atomically)."""
        if not self.path_for(table_id).exists():
            raise FileNotFoundError(f"no saved table {table_id}")
        pointer = {"schema_version": SCHEMA_VERSION, "table_id": table_id}
        atomic_write_text(self.active_path, json.dumps(pointer, indent=1))

    def active_id(self) -> str | None:
        """The active table id, or None if the pointer is missing or unreadable."""
        try:
            return validate_pointer_json(self.active_path.read_bytes())
        except (OSError, ValueError):
            return None

    def read(self, table_id: str) -> FrontierTable:
        """Read one saved table; raises OSError / ValueError."""
        return FrontierTable.from_json(self.path_for(table_id).read_text(encoding="utf-8"))

    def load_active(self, fingerprint: Fingerprint) -> LoadResult:
        """Load the active table and check it against the engine's fingerprint (exact match required)."""
        if not self.active_path.exists():
            return LoadResult("missing", f"no active calibration table in {self.root}")
        try:
            table_id = validate_pointer_json(self.active_path.read_bytes())
            path = self.path_for(table_id)
        except (OSError, ValueError) as exc:
            return LoadResult("corrupt", f"ignoring active pointer {self.active_path}: {exc}", path=self.active_path)
        if not path.exists():
            return LoadResult("missing", f"active table {table_id} not found at {path}", path=path)
        try:
            table = FrontierTable.from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            return LoadResult("corrupt", f"ignoring corrupt table {path.name}: {exc}", path=path)
        if table.table_id != table_id:
            return LoadResult("corrupt", f"ignoring {path.name}: it holds table {table.table_id}", path=path)
        diff = table.fingerprint.differences(fingerprint)
        if diff:
            details = "; ".join(table.fingerprint.describe_differences(fingerprint))
            msg = f"table {table_id} was calibrated for a different setup ({details}); recalibrate"
            return LoadResult("stale", msg, table=table, path=path)
        return LoadResult("ok", f"using table {table_id} ({len(table.rows)} rows)", table=table, path=path)

    def history(self) -> list[TableEntry]:
        """Every saved table, newest first (ids start with a UTC timestamp); unreadable files are listed with error."""
        if not self.tables_dir.is_dir():
            return []
        active = self.active_id()
        entries: list[TableEntry] = []
        for path in sorted(self.tables_dir.glob("*.json"), key=lambda p: p.stem, reverse=True):
            tid = path.stem
            try:
                t = FrontierTable.from_json(path.read_text(encoding="utf-8"))
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                entries.append(TableEntry(tid, path, tid == active, None, None, 0, error=str(exc)))
                continue
            entries.append(TableEntry(tid, path, tid == active, t.created_at, t.fingerprint, len(t.rows)))
        return entries


def calibration_store(model: str, draft: str | None, runtime: str | None = None) -> TableStore:
    """The table store for one target/draft pair: a folder per pair, so calibrating another pair does not replace
    this pair's active table. Keyed cheaply by file name and size; the fingerprint inside still checks the hashes.
    runtime: another runtime's tag (an external llama-server's), which gets folders of its own."""

    def slug(path: str) -> str:
        p = Path(path)
        size = p.stat().st_size if p.exists() else 0
        return re.sub(r"[^A-Za-z0-9._-]+", "_", p.stem)[:60] + f"-{size}"

    name = slug(model) + ("__" + slug(draft) if draft else "") + (f"@{runtime}" if runtime else "")
    return TableStore(get_paths().calibration / name)
