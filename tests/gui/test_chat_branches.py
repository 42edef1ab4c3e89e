"""Chat branches: edit a message and resend, regenerate a reply, switch versions with `‹ i/n ›`, export the active
path and re-import every branch, all through the real window and engine; the store's tree on its own; and the
migration of a history written before branches."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QFileDialog

import app.gui.chat as chat_module
from app.gui import branches, chat_export
from app.gui.main import MainWindow
from app.gui.store import SCHEMA_VERSION, ChatStore, Message

# -- the store on its own -------------------------------------------------------------------------------------------


def _texts(messages: list[Message]) -> list[str]:
    return [m.content for m in messages]


def test_tree_path_siblings_and_switch(tmp_path: Path) -> None:
    s = ChatStore(tmp_path / "c.db")
    c = s.create_conversation()
    q = s.add_message(c.id, "user", "q1")
    a = s.add_message(c.id, "assistant", "a1")
    s.add_message(c.id, "user", "follow-up")
    assert [m.parent_id for m in s.active_path(c.id)] == [None, q.id, a.id]

    a2 = s.add_child(c.id, q.id, "assistant", "a2")  # a regenerated reply: a new version of a1, now active
    assert _texts(s.active_path(c.id)) == ["q1", "a2"]
    assert [m.id for m in s.siblings(a.id)] == [a.id, a2.id] == [m.id for m in s.siblings(a2.id)]
    assert s.switch(a2.id, +1) is None and s.switch(a.id, -1) is None  # past the ends: nothing changes
    assert _texts(s.active_path(c.id)) == ["q1", "a2"]
    assert s.switch(a2.id, -1) == a
    assert _texts(s.active_path(c.id)) == ["q1", "a1", "follow-up"]  # the continuation last used below a1

    q2 = s.branch_from(q.id, "q1 edited")  # an edited first message: a second root
    assert q2 is not None and q2.parent_id is None and q2.role == "user"
    assert _texts(s.active_path(c.id)) == ["q1 edited"] and s.messages(c.id) == s.active_path(c.id)
    s.add_message(c.id, "assistant", "b1")
    assert _texts(s.active_path(c.id)) == ["q1 edited", "b1"]
    s.switch(q2.id, -1)
    assert _texts(s.active_path(c.id)) == ["q1", "a1", "follow-up"]
    places = branches.positions(s.tree(c.id))
    assert [places[m.id] for m in s.active_path(c.id)] == [(1, 2), (1, 2), (1, 1)]
    s.close()

    s = ChatStore(tmp_path / "c.db")  # the choice of branch is kept
    assert _texts(s.active_path(c.id)) == ["q1", "a1", "follow-up"]
    s.delete_message(a.id)  # a message goes with all that followed it
    assert _texts(s.active_path(c.id)) == ["q1", "a2"] and len(s.tree(c.id)) == 4
    assert s.get_message(a.id) is None and s.siblings(a.id) == [] and s.branch_from(a.id, "x") is None


def test_active_path_survives_a_self_parented_row() -> None:
    loop = [Message(1, 1, "user", "a"), Message(2, 1, "assistant", "b", parent_id=2)]
    assert [m.id for m in branches.active_path(loop)] == [1]
    assert branches.up_to(loop, None) == [] and branches.up_to(loop, 1) == loop[:1] and branches.up_to(loop, 9) == loop


def test_json_export_keeps_branches_and_which_one_was_active(tmp_path: Path) -> None:
    s = ChatStore(tmp_path / "c.db")
    c = s.create_conversation("Tree", "sys", {"temperature": 0.0})
    q = s.add_message(c.id, "user", "q")
    a1 = s.add_message(c.id, "assistant", "a1", {"tok_s": 3.0})
    s.add_message(c.id, "user", "under a1")
    a2 = s.add_child(c.id, q.id, "assistant", "a2")
    older = s.add_child(c.id, a2.id, "user", "under a2, older")
    s.add_child(c.id, a2.id, "user", "under a2, newer")
    s.switch(older.id, +1)
    s.switch(older.id + 1, -1)  # below a2 the older one was used last, though it is not the newest
    s.switch(a2.id, -1)  # then a1 again
    conv = s.get_conversation(c.id)
    assert conv is not None
    text = chat_export.to_json(conv, s.active_path(c.id), s.tree(c.id))
    data = json.loads(text)
    assert [m["content"] for m in data["messages"]] == ["q", "a1", "under a1"]  # what an older reader imports
    assert {m["content"] for m in data["branches"]} == {"a2", "under a2, older", "under a2, newer"}

    new = chat_export.import_json(s, text)
    assert (new.title, new.system_prompt, new.settings) == ("Tree", "sys", {"temperature": 0.0})
    assert _texts(s.active_path(new.id)) == ["q", "a1", "under a1"] and s.active_path(new.id)[1].stats == a1.stats
    assert s.switch(s.active_path(new.id)[1].id, +1) is not None  # to a2, a version after a1 as in the original
    assert _texts(s.active_path(new.id)) == ["q", "a2", "under a2, older"]  # the continuation used last
    assert len(s.tree(new.id)) == len(s.tree(c.id)) == 6

    # An export from before branches (no ids) imports as the one branch it is.
    old = {"format": "dynadraft-chat", "version": 1, "title": "Old", "messages": [{"role": "user", "content": "hi"}]}
    assert _texts(s.active_path(chat_export.import_json(s, json.dumps(old)).id)) == ["hi"]
    n = len(s.list_conversations())
    for bad in (
        {**data, "branches": [{**data["branches"][0], "parent": 999}]},  # follows nothing in the file
        {**data, "branches": [{**b, "parent": b["id"]} for b in data["branches"]]},  # parents that loop
        {**data, "branches": [{**data["branches"][0], "id": data["messages"][0]["id"]}]},  # an id used twice
    ):
        try:
            chat_export.import_json(s, json.dumps(bad))
            raise AssertionError("imported a broken tree")
        except chat_export.ChatImportError:
            pass
    assert len(s.list_conversations()) == n  # refused before anything was written


# -- migration ------------------------------------------------------------------------------------------------------

# A history written by ChatStore at schema version 1 (the app before branches), dumped with sqlite3's iterdump:
# three chats (one empty), ids interleaved between chats, reply stats with draft segments, settings and a system
# prompt, and text with quotes and newlines.
V1_HISTORY = """
CREATE TABLE conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    settings TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
INSERT INTO "conversations" VALUES(1,'Colours','Be brief.','{"temperature": 0.0, "max_tokens": 8, "spec_mode": "off"}',1.79668102271298861507e+09,1.79668102271416854857e+09);
INSERT INTO "conversations" VALUES(2,'Empty chat','','{}',1.79668102271386671059e+09,1.79668102271386671059e+09);
INSERT INTO "conversations" VALUES(3,'Code','','{"seed": 7}',1.79668102271397352219e+09,1.79668102271425175666e+09);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    stats TEXT,
    created REAL NOT NULL
);
INSERT INTO "messages" VALUES(1,1,'user','Name a colour.',NULL,1.79668102271328282361e+09);
INSERT INTO "messages" VALUES(2,1,'assistant','Blue.','{"tok_s": 41.5, "tokens": 2, "segments": [["Blue.", 0, 2]], "dd": {"applied": false, "reason": "disabled"}}',1.79668102271344184875e+09);
INSERT INTO "messages" VALUES(3,1,'user','Another?',NULL,1.79668102271357870095e+09);
INSERT INTO "messages" VALUES(4,1,'assistant','Green.','{"tok_s": 40.0, "tokens": 2}',1.79668102271375894549e+09);
INSERT INTO "messages" VALUES(5,3,'user','print hi',NULL,1.79668102271408128734e+09);
INSERT INTO "messages" VALUES(6,1,'user','And a third?',NULL,1.79668102271416854857e+09);
INSERT INTO "messages" VALUES(7,3,'assistant','```python
print(''hi'')
```',NULL,1.79668102271425175666e+09);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('conversations',3);
INSERT INTO "sqlite_sequence" VALUES('messages',7);
PRAGMA user_version=1;
"""  # noqa: E501 - rows as sqlite3 dumped them


def _v1_history(path: Path) -> list[tuple[object, ...]]:
    """Write the version 1 history and return its rows as version 1 read them (each chat's messages by id)."""
    raw = sqlite3.connect(path)
    raw.executescript(V1_HISTORY)
    rows = raw.execute("SELECT id, conversation_id, role, content, stats, created FROM messages ORDER BY id").fetchall()
    raw.close()
    return rows


def _dump(path: Path) -> list[str]:
    raw = sqlite3.connect(path)
    try:
        return [*raw.iterdump(), f"user_version={raw.execute('PRAGMA user_version').fetchone()[0]}"]
    finally:
        raw.close()


def test_a_version_1_history_becomes_one_branch_per_chat_and_reopening_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    old_rows = _v1_history(db)
    s = ChatStore(db)
    assert s.schema_version == SCHEMA_VERSION == 2 and not s.problems
    convs = {c.id: c for c in s.list_conversations()}
    assert (convs[1].title, convs[1].system_prompt, convs[1].settings) == (
        "Colours",
        "Be brief.",
        {"temperature": 0.0, "max_tokens": 8, "spec_mode": "off"},
    )
    assert (convs[2].title, convs[3].settings, convs[1].updated) == (
        "Empty chat",
        {"seed": 7},
        1.79668102271416854857e09,
    )
    for cid in convs:
        path = s.active_path(cid)
        expected = [r for r in old_rows if r[1] == cid]
        got = [(m.id, m.conversation_id, m.role, m.content, m.stats, m.created) for m in path]
        assert got == [(*r[:4], json.loads(r[4]) if r[4] else None, r[5]) for r in expected]
        assert [m.parent_id for m in path] == [None, *[m.id for m in path]][: len(path)]  # chained in their old order
        assert len(s.tree(cid)) == len(path)  # one branch: nothing else
        assert all(places == (1, 1) for places in branches.positions(s.tree(cid)).values())
    assert s.active_path(2) == []
    assert s.active_path(1)[1].stats == {
        "tok_s": 41.5,
        "tokens": 2,
        "segments": [["Blue.", 0, 2]],
        "dd": {"applied": False, "reason": "disabled"},
    }
    s.close()

    migrated = _dump(db)
    ChatStore(db).close()  # opening it again is a no-op
    assert _dump(db) == migrated

    s = ChatStore(db)  # and the migrated chat goes on as a tree
    s.add_message(1, "assistant", "Red.")
    assert _texts(s.active_path(1))[-2:] == ["And a third?", "Red."]
    again = s.branch_from(3, "Another one?")
    assert (
        again is not None
        and again.parent_id == 2
        and _texts(s.active_path(1)) == ["Name a colour.", "Blue.", "Another one?"]
    )
    assert [m.id for m in s.active_path(1)][:2] == [1, 2] and s.switch(again.id, -1) is not None
    assert _texts(s.active_path(1)) == ["Name a colour.", "Blue.", "Another?", "Green.", "And a third?", "Red."]
    s.close()


# -- through the real window ----------------------------------------------------------------------------------------


def _shown(w: MainWindow) -> list[tuple[str, str, str]]:
    """What the transcript shows: each bubble's role, text and `‹ i/n ›` (empty when the message has one version)."""
    QCoreApplication.processEvents()  # a layout shows a new child with a queued call, as the event loop would
    return [(b.role, b.content, b.branch.text() if b.branch.isVisible() else "") for b in w.chat.bubbles()]


def test_edit_resend_switch_regenerate_and_export(  # type: ignore[no-untyped-def]
    make_window, gui_engine, qtbot, tmp_path: Path, monkeypatch
) -> None:
    w: MainWindow = make_window(engine=gui_engine)
    w.resize(1000, 640)
    w.chat.new_conversation()
    w.chat.apply_settings("Answer in one short sentence.", {"temperature": 0.0, "max_tokens": 8, "spec_mode": "off"})
    sent: list[list[str]] = []  # the conversation each request carried to the engine
    build = chat_module.build_request
    monkeypatch.setattr(chat_module, "build_request", lambda conv, h: (sent.append(_texts(h)), build(conv, h))[1])

    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as first:
        assert w.chat.send("Name a colour.")
    a1: Message = first.args[0]
    assert a1 is not None and _shown(w) == [("user", "Name a colour.", ""), ("assistant", a1.content, "")]

    # Edit the question in place and send it: a second version, the first kept with its reply.
    question = w.chat.bubbles()[0]
    assert question.edit_btn.isVisible() and not w.chat.bubbles()[1].edit_btn.isVisible()
    qtbot.mouseClick(question.edit_btn, Qt.MouseButton.LeftButton)
    assert question.edit_box is not None and question.edit_box.editor.toPlainText() == "Name a colour."
    qtbot.mouseClick(question.edit_box.cancel_btn, Qt.MouseButton.LeftButton)  # Cancel changes nothing
    assert question.edit_box is None and question.edit_btn.isVisible() and len(w.store.tree(w.chat.conv.id)) == 2  # type: ignore[union-attr]
    qtbot.mouseClick(question.edit_btn, Qt.MouseButton.LeftButton)
    assert question.edit_box is not None
    question.edit_box.editor.setPlainText("Name a fruit.")
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as second:
        qtbot.mouseClick(question.edit_box.send_btn, Qt.MouseButton.LeftButton)
        busy = w.chat.bubbles()[0]
        assert busy.branch.text() == "‹ 2/2 ›" and not busy.branch.prev_btn.isEnabled()  # no switching mid-reply
    b1: Message = second.args[0]
    assert _shown(w) == [("user", "Name a fruit.", "‹ 2/2 ›"), ("assistant", b1.content, "")]
    assert sent[-1] == ["Name a fruit."]  # the new branch only, not the old question and answer
    conv_id = w.chat.conv.id  # type: ignore[union-attr]
    assert len(w.store.tree(conv_id)) == 4 and a1.id in {m.id for m in w.store.tree(conv_id)}

    # Switch back to the first version: its reply comes back with it.
    qtbot.mouseClick(w.chat.bubbles()[0].branch.prev_btn, Qt.MouseButton.LeftButton)
    assert _shown(w) == [("user", "Name a colour.", "‹ 1/2 ›"), ("assistant", a1.content, "")]
    assert _texts(w.store.active_path(conv_id)) == ["Name a colour.", a1.content]

    # Regenerate that reply (fewer tokens, so it reads differently): a second version beside it.
    w.chat.apply_settings(None, {"max_tokens": 3})
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as third:
        qtbot.mouseClick(w.chat.bubbles()[1].regen_btn, Qt.MouseButton.LeftButton)
    a2: Message = third.args[0]
    assert a2.stats is not None and a2.stats["tokens"] <= 3 and a2.parent_id == a1.parent_id
    assert sent[-1] == ["Name a colour."]
    assert _shown(w) == [("user", "Name a colour.", "‹ 1/2 ›"), ("assistant", a2.content, "‹ 2/2 ›")]
    w.grab().save("/tmp/branches.png")
    qtbot.mouseClick(w.chat.bubbles()[1].branch.prev_btn, Qt.MouseButton.LeftButton)
    assert _shown(w)[1] == ("assistant", a1.content, "‹ 1/2 ›")
    qtbot.mouseClick(w.chat.bubbles()[1].branch.next_btn, Qt.MouseButton.LeftButton)
    assert _shown(w)[1] == ("assistant", a2.content, "‹ 2/2 ›")
    shown = _shown(w)

    # Export: Markdown is the active path; JSON keeps every branch and imports back as the same tree.
    for name in ("chat.md", "chat.json"):
        monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, t=tmp_path / name, **k: (str(t), ""))
        w.export_action.trigger()
    md = (tmp_path / "chat.md").read_text()
    assert "Name a colour." in md and a2.content.strip() in md and "Name a fruit." not in md
    data = json.loads((tmp_path / "chat.json").read_text())
    assert [m["content"] for m in data["messages"]] == ["Name a colour.", a2.content]
    assert sorted(m["content"] for m in data["branches"]) == sorted(["Name a fruit.", b1.content, a1.content])
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(tmp_path / "chat.json"), ""))
    w.import_action.trigger()
    assert w.chat.conv is not None and w.chat.conv.id != conv_id and _shown(w) == shown
    assert sorted(_texts(w.store.tree(w.chat.conv.id))) == sorted(_texts(w.store.tree(conv_id)))
    w.close()

    w2: MainWindow = make_window()  # a restart shows the branch last chosen, with its controls
    w2.chat.open_conversation(conv_id)
    assert _shown(w2) == shown
    qtbot.mouseClick(w2.chat.bubbles()[0].branch.next_btn, Qt.MouseButton.LeftButton)
    assert _shown(w2) == [("user", "Name a fruit.", "‹ 2/2 ›"), ("assistant", b1.content, "")]
    assert not w2.chat.bubbles()[0].edit_btn.isVisible()  # no model: nothing to send an edit to
