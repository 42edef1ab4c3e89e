"""The chat history store (no Qt): conversations, messages, search, WAL mode, cascade delete."""

from __future__ import annotations

from pathlib import Path

from app.gui.store import DEFAULT_TITLE, ChatStore


def test_roundtrip_and_reopen(tmp_path: Path) -> None:
    db = tmp_path / "h" / "chats.sqlite3"
    s = ChatStore(db)
    assert s.journal_mode == "wal"
    c = s.create_conversation(system_prompt="be brief", settings={"temperature": 0.0})
    assert c.title == DEFAULT_TITLE
    s.add_message(c.id, "user", "hi")
    s.add_message(c.id, "assistant", "hello", {"tok_s": 12.5, "dd": {"applied": False}})
    s.rename_conversation(c.id, "Greetings")
    s.close()
    s2 = ChatStore(db)
    [conv] = s2.list_conversations()
    assert conv.title == "Greetings" and conv.system_prompt == "be brief" and conv.settings == {"temperature": 0.0}
    msgs = s2.messages(conv.id)
    assert [(m.role, m.content) for m in msgs] == [("user", "hi"), ("assistant", "hello")]
    assert msgs[1].stats == {"tok_s": 12.5, "dd": {"applied": False}}


def test_search_and_delete(tmp_path: Path) -> None:
    s = ChatStore(tmp_path / "c.db")
    a = s.create_conversation("Python tips")
    b = s.create_conversation("Cooking")
    s.add_message(b.id, "user", "how long to boil 100% of an egg_white?")
    assert [c.id for c in s.list_conversations("python")] == [a.id]
    assert [c.id for c in s.list_conversations("EGG")] == [b.id]
    assert [c.id for c in s.list_conversations("100%")] == [b.id]
    assert s.list_conversations("0_e") == []  # LIKE wildcards are escaped
    s.delete_conversation(b.id)
    assert s.messages(b.id) == []  # cascade
    assert [c.id for c in s.list_conversations()] == [a.id]
    s.update_conversation(a.id, system_prompt="x", settings={"max_tokens": 5})
    conv = s.get_conversation(a.id)
    assert conv is not None and conv.system_prompt == "x" and conv.settings == {"max_tokens": 5}
