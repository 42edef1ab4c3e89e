"""The app starts whatever the chat history holds, and a second launch hands over instead of freezing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from app.gui.store import ChatStore
from app.paths import get_paths

REPO_ROOT = Path(__file__).resolve().parents[2]


def _titles(window) -> list[str]:  # type: ignore[no-untyped-def]
    lst = window.chat.conversations.list
    return [lst.item(i).text() for i in range(lst.count())]


def test_corrupt_history_file_is_moved_aside_and_the_app_starts(make_window) -> None:  # type: ignore[no-untyped-def]
    db = get_paths().history_db
    db.parent.mkdir(parents=True, exist_ok=True)
    garbage = b"this is not an SQLite database, it was damaged\n" * 200
    db.write_bytes(garbage)
    w = make_window()
    note = w.history_note.text()
    assert w.history_note.isVisible() and "moved to" in note and "a new one started" in note, note
    [aside] = [p for p in db.parent.iterdir() if ".corrupt-" in p.name]
    assert aside.read_bytes() == garbage  # kept for the user, not deleted
    conv = w.store.create_conversation("after the repair")
    assert w.store.get_conversation(conv.id) is not None
    shots = os.environ.get("DYNADRAFT_SHOTS")
    if shots:
        w.resize(1100, 700)
        w.grab().save(str(Path(shots) / "harden-history-moved-aside.png"))


def test_bad_json_cell_skips_that_chat_only(make_window) -> None:  # type: ignore[no-untyped-def]
    db = get_paths().history_db
    s = ChatStore(db)
    good = s.create_conversation("Good chat")
    s.add_message(good.id, "user", "hello")
    s.add_message(good.id, "assistant", "hi", {"tok_s": 1.0})
    bad = s.create_conversation("Broken chat")
    s.close()
    raw = sqlite3.connect(db)
    raw.execute("UPDATE conversations SET settings='{not json' WHERE id=?", (bad.id,))
    raw.execute("UPDATE messages SET stats='[[' WHERE role='assistant'")
    raw.commit()
    raw.close()
    w = make_window()
    assert _titles(w) == ["Good chat"]
    note = w.history_note.text()
    assert w.history_note.isVisible() and "'Broken chat'" in note and "skipped" in note, note
    assert [m.content for m in w.store.messages(good.id)] == ["hello", "hi"]  # a bad stats cell loses no text
    assert "reply statistics are not valid JSON" in note


def test_second_launch_brings_the_first_window_forward(make_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.gui.instance import SingleInstance

    w = make_window()
    instance = SingleInstance()
    assert instance.claim()
    calls: list[int] = []
    instance.activated.connect(lambda: calls.append(1))
    instance.activated.connect(w.bring_to_front)
    try:
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "app"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO_ROOT,
        )
        qtbot.waitUntil(lambda: proc.poll() is not None, timeout=120_000)  # our event loop answers it meanwhile
        out, err = proc.communicate()
        assert proc.returncode == 0, err
        assert "already running" in out
        qtbot.waitUntil(lambda: calls == [1], timeout=10_000)
        # It never opened the history: the first window's store is the only one (nothing waited on a lock).
        assert not any(".corrupt-" in p.name for p in get_paths().history.iterdir())
    finally:
        instance.close()
