"""Chat history in SQLite (WAL): conversations with their settings, and their messages as a tree of branches (no Qt)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.gui import branches

SCHEMA_VERSION = 2
DEFAULT_TITLE = "New chat"
BUSY_TIMEOUT_S = 0.25  # sqlite's default of 5 s would freeze the window while another process writes

# Messages form a tree: `parent_id` is the message a message follows (NULL for a first message), so an edited
# message or a regenerated reply is a sibling of the one it replaces and both continuations are kept. `chosen` is a
# per-conversation counter stamped on a message each time it is made the active one among its siblings: a message's
# active child is its child with the highest `chosen`, and the active path (what the chat shows and sends) follows
# active children from the most recently chosen first message. parent_id has no foreign key: SQLite runs a cascade
# as nested triggers, and along a chain of 1,100 messages it failed with "too many levels of trigger recursion"
# (SQLite 3.40), so `delete_message` removes a subtree itself.
_TABLES = """
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
    created REAL NOT NULL,
    parent_id INTEGER,
    chosen INTEGER NOT NULL DEFAULT 0
)
"""

# Version 1 kept each chat as a list ordered by id: each message now follows the one before it in its chat, so
# every old chat is one branch, shown and sent exactly as before. Its `chosen` stays 0: each node has one child.
_TO_V2 = """
ALTER TABLE messages ADD COLUMN parent_id INTEGER;
ALTER TABLE messages ADD COLUMN chosen INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET parent_id = (
    SELECT MAX(p.id) FROM messages p WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id
)
"""

_INDEXES = """
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
CREATE INDEX IF NOT EXISTS messages_by_parent ON messages(conversation_id, parent_id)
"""


def _statements(script: str) -> list[str]:
    return [s for s in (part.strip() for part in script.split(";")) if s]


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
    parent_id: int | None = None  # the message this one follows; None for a first message


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
        self._migrate()
        check = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]
        if check != "ok":
            self._db.close()
            raise sqlite3.DatabaseError(f"integrity check failed: {check}")

    def _migrate(self) -> None:
        """Create the tables, or bring an older history up to SCHEMA_VERSION in one transaction (a no-op when it
        is already there). The columns, not only user_version, decide: a file from before user_version was set
        still has version 1's tables."""
        with self._tx() as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            for stmt in _statements(_TABLES):
                db.execute(stmt)
            columns = {row["name"] for row in db.execute("PRAGMA table_info(messages)")}
            if "parent_id" not in columns:
                for stmt in _statements(_TO_V2):
                    db.execute(stmt)
            for stmt in _statements(_INDEXES):
                db.execute(stmt)
            if version < SCHEMA_VERSION:  # a newer app's number is left alone
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

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
            parent_id=row["parent_id"],
        )

    def add_message(
        self, conversation_id: int, role: str, content: str, stats: dict[str, Any] | None = None
    ) -> Message:
        """Append a message to the end of the chat's active path."""
        path = self.active_path(conversation_id)
        return self.add_child(conversation_id, path[-1].id if path else None, role, content, stats)

    def add_child(
        self,
        conversation_id: int,
        parent_id: int | None,
        role: str,
        content: str,
        stats: dict[str, Any] | None = None,
    ) -> Message:
        """A new message after `parent_id` (None: a new first message), made the active one among its siblings."""
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO messages(conversation_id, role, content, stats, created, parent_id, chosen) "
                "VALUES (?,?,?,?,?,?,?)",
                (
                    conversation_id,
                    role,
                    content,
                    json.dumps(stats) if stats is not None else None,
                    now,
                    parent_id,
                    self._next_chosen(conversation_id),
                ),
            )
            db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))
        return Message(int(cur.lastrowid or 0), conversation_id, role, content, stats, now, parent_id)

    def _next_chosen(self, conversation_id: int) -> int:
        row = self._db.execute(
            "SELECT COALESCE(MAX(chosen), 0) + 1 FROM messages WHERE conversation_id=?", (conversation_id,)
        ).fetchone()
        return int(row[0])

    def tree(self, conversation_id: int) -> list[Message]:
        """Every message of the chat, every branch, least recently chosen first (see `branches`)."""
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id=? ORDER BY chosen, id", (conversation_id,)
        ).fetchall()
        return [self._msg(r) for r in rows]

    def active_path(self, conversation_id: int) -> list[Message]:
        """The active branch, first message to last: what the chat shows, sends to the model and exports."""
        return branches.active_path(self.tree(conversation_id))

    def messages(self, conversation_id: int) -> list[Message]:
        """The active path (`active_path`), under the name callers used before chats had branches."""
        return self.active_path(conversation_id)

    def get_message(self, message_id: int) -> Message | None:
        row = self._db.execute("SELECT * FROM messages WHERE id=?", (message_id,)).fetchone()
        return self._msg(row) if row else None

    def siblings(self, message_id: int) -> list[Message]:
        """The message and the others after the same parent (its versions), oldest first; [] if it is gone."""
        rows = self._db.execute(
            "SELECT s.* FROM messages m JOIN messages s "
            "ON s.conversation_id = m.conversation_id AND s.parent_id IS m.parent_id WHERE m.id=? ORDER BY s.id",
            (message_id,),
        ).fetchall()
        return [self._msg(r) for r in rows]

    def branch_from(self, message_id: int, content: str, stats: dict[str, Any] | None = None) -> Message | None:
        """A new version of a message (same parent and role) with `content`, made active; the old version and all
        that followed it stay as a branch. None if the message is gone."""
        m = self.get_message(message_id)
        if m is None:
            return None
        return self.add_child(m.conversation_id, m.parent_id, m.role, content, stats)

    def switch(self, message_id: int, step: int) -> Message | None:
        """Make the version `step` places from this one (-1 the previous, +1 the next) the active one; the path then
        continues with what was last used below it. None (nothing changed) past the first or last version."""
        sibs = self.siblings(message_id)
        i = next((k for k, m in enumerate(sibs) if m.id == message_id), None)
        if i is None or not 0 <= i + step < len(sibs):
            return None
        self.choose(sibs[i + step])
        return sibs[i + step]

    def choose(self, message: Message) -> None:
        """Make `message` the active one among its versions (on the active path if its parent is)."""
        with self._tx() as db:
            db.execute(
                "UPDATE messages SET chosen=? WHERE id=?", (self._next_chosen(message.conversation_id), message.id)
            )

    def delete_message(self, message_id: int) -> None:
        """Delete a message and everything that follows it (its whole subtree)."""
        with self._tx() as db:
            db.execute(
                "WITH RECURSIVE sub(id) AS "
                "(SELECT ? UNION SELECT m.id FROM messages m JOIN sub ON m.parent_id = sub.id) "
                "DELETE FROM messages WHERE id IN (SELECT id FROM sub)",
                (message_id,),
            )


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
