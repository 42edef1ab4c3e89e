"""Chat history in SQLite (WAL): conversations with per-conversation settings, and messages with reply stats (no Qt)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
DEFAULT_TITLE = "New chat"
BUSY_TIMEOUT_S = 0.25  # sqlite's default of 5 s would freeze the window while another process writes

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    settings TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    stats TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
"""


@dataclass
class Conversation:
    """One chat: its title, system prompt and sampling/speculation settings (a JSON-able dict)."""

    id: int
    title: str
    system_prompt: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    created: float = 0.0
    updated: float = 0.0


@dataclass
class Message:
    """One chat message; assistant replies carry `stats` (tok/s, TTFT, acceptance, Dynamic Draft decision...)."""

    id: int
    conversation_id: int
    role: str
    content: str
    stats: dict[str, Any] | None = None
    created: float = 0.0


class ChatStore:
    """A small repository over one SQLite file; use it from one thread (the GUI's main thread).

    `problems` collects what could not be read (a damaged row is skipped, never fatal), for the window to show.
    """

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.problems: list[str] = []
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit; `_tx` groups writes. A short busy timeout: the GUI thread must never wait seconds on a lock.
        self._db = sqlite3.connect(str(path), isolation_level=None, timeout=busy_timeout_s)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL is durable across application crashes in WAL mode and avoids an fsync per reply on laptops.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        with self._tx():
            for stmt in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                self._db.execute(stmt)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        check = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]
        if check != "ok":
            self._db.close()
            raise sqlite3.DatabaseError(f"integrity check failed: {check}")

    @property
    def journal_mode(self) -> str:
        return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    # -- conversations --------------------------------------------------------------------------------------------
    @staticmethod
    def _conv(row: sqlite3.Row) -> Conversation:
        return Conversation(
            id=row["id"],
            title=row["title"],
            system_prompt=row["system_prompt"],
            settings=json.loads(row["settings"] or "{}"),
            created=row["created"],
            updated=row["updated"],
        )

    def create_conversation(
        self, title: str = DEFAULT_TITLE, system_prompt: str = "", settings: dict[str, Any] | None = None
    ) -> Conversation:
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO conversations(title, system_prompt, settings, created, updated) VALUES (?,?,?,?,?)",
                (title, system_prompt, json.dumps(settings or {}), now, now),
            )
        conv = self.get_conversation(int(cur.lastrowid or 0))
        assert conv is not None
        return conv

    def get_conversation(self, conversation_id: int) -> Conversation | None:
        row = self._db.execute("SELECT * FROM conversations WHERE id=?", (conversation_id,)).fetchone()
        if not row:
            return None
        try:
            return self._conv(row)
        except (ValueError, TypeError) as e:
            self._note(f"chat {conversation_id} skipped: its settings are not valid JSON ({e})")
            return None

    def list_conversations(self, search: str = "") -> list[Conversation]:
        """Newest first; `search` matches titles and message text (case-insensitive substring)."""
        if search:
            escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            like = f"%{escaped}%"
            rows = self._db.execute(
                "SELECT * FROM conversations c WHERE c.title LIKE ? ESCAPE '\\' OR EXISTS "
                "(SELECT 1 FROM messages m WHERE m.conversation_id=c.id AND m.content LIKE ? ESCAPE '\\') "
                "ORDER BY c.updated DESC, c.id DESC",
                (like, like),
            ).fetchall()
        else:
            rows = self._db.execute("SELECT * FROM conversations ORDER BY updated DESC, id DESC").fetchall()
        out = []
        for r in rows:
            try:
                out.append(self._conv(r))
            except (ValueError, TypeError) as e:  # a damaged settings cell: skip this chat, keep the rest
                self._note(f"chat {r['id']} ({r['title']!r}) skipped: its settings are not valid JSON ({e})")
        return out

    def _note(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE conversations SET title=? WHERE id=?", (title.strip() or DEFAULT_TITLE, conversation_id))

    def update_conversation(
        self, conversation_id: int, *, system_prompt: str | None = None, settings: dict[str, Any] | None = None
    ) -> None:
        with self._tx() as db:
            if system_prompt is not None:
                db.execute("UPDATE conversations SET system_prompt=? WHERE id=?", (system_prompt, conversation_id))
            if settings is not None:
                db.execute("UPDATE conversations SET settings=? WHERE id=?", (json.dumps(settings), conversation_id))

    def delete_conversation(self, conversation_id: int) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

    # -- messages -------------------------------------------------------------------------------------------------
    def _msg(self, row: sqlite3.Row) -> Message:
        try:
            stats = json.loads(row["stats"]) if row["stats"] else None
        except ValueError as e:  # the text is what matters; damaged reply stats are dropped with a note
            stats = None
            self._note(f"message {row['id']}: its reply statistics are not valid JSON and were ignored ({e})")
        return Message(
            id=row["id"],
            conversation_id=row["conversation_id"],
            role=row["role"],
            content=row["content"],
            stats=stats,
            created=row["created"],
        )

    def add_message(
        self, conversation_id: int, role: str, content: str, stats: dict[str, Any] | None = None
    ) -> Message:
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO messages(conversation_id, role, content, stats, created) VALUES (?,?,?,?,?)",
                (conversation_id, role, content, json.dumps(stats) if stats is not None else None, now),
            )
            db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))
        return Message(int(cur.lastrowid or 0), conversation_id, role, content, stats, now)

    def messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id=? ORDER BY id", (conversation_id,)
        ).fetchall()
        return [self._msg(r) for r in rows]

    def delete_message(self, message_id: int) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM messages WHERE id=?", (message_id,))


def open_store(path: Path) -> ChatStore:
    """Open the history for the app: a file SQLite cannot read is moved aside (kept, never deleted) and a new
    history starts; a file another process holds locked opens as a temporary in-memory history. Either way the
    reason is in `problems`, so the window can say so."""
    try:
        return ChatStore(path)
    except sqlite3.OperationalError as e:
        if "locked" not in str(e) and "busy" not in str(e):
            return _moved_aside(path, e)
        store = ChatStore(":memory:")
        store.problems.append(f"the chat history {path} is in use by another process ({e}); chats here are not saved")
        return store
    except sqlite3.DatabaseError as e:
        return _moved_aside(path, e)


def _moved_aside(path: Path, err: Exception) -> ChatStore:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        src = path.with_name(path.name + suffix)
        if src.exists():
            src.replace(aside.with_name(aside.name + suffix))
    store = ChatStore(path)
    store.problems.append(f"the chat history could not be read ({err}); it was moved to {aside} and a new one started")
    return store
