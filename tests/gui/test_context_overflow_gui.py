"""A chat longer than the context window, in the real window on the real engine: by default its oldest turns are
left out and the reply says so; set to "Stop with an error", it stops with the engine's message."""

from __future__ import annotations

import os
from pathlib import Path

from app.gui.chat_settings import ConversationSettingsDialog
from app.gui.main import MainWindow

LONG = "The quick brown fox jumps over the lazy dog near the river bank. " * 30  # ~400 tokens


def _long_chat(w: MainWindow, **settings: object) -> int:
    """A conversation whose history (six ~400-token turns) is longer than the test engine's 2048-token window."""
    w.chat.new_conversation()
    w.chat.apply_settings("You are terse.", {"temperature": 0.0, "max_tokens": 16, "spec_mode": "off", **settings})
    conv = w.chat.conv
    assert conv is not None
    for i in range(6):
        w.chat.store.add_message(conv.id, "user", f"Part {i}: {LONG}")
        w.chat.store.add_message(conv.id, "assistant", f"Noted part {i}.")
    w.chat.open_conversation(conv.id)
    return conv.id


def test_a_chat_longer_than_the_context_leaves_out_its_oldest_turns(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=gui_engine, model_label="SmolLM2-135M (test)")
    _long_chat(w)
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
        assert w.chat.send("Which part was last?")
    saved = blocker.args[0]
    assert saved is not None and saved.content
    dropped = saved.stats["dropped_messages"]
    assert dropped > 0 and dropped % 2 == 0 and saved.stats["prompt_tokens"] + 16 <= 2048
    footer = w.chat.bubbles()[-1].stats_label.text()
    assert f"{dropped} oldest messages left out: the context window is full" in footer
    assert len(w.chat.bubbles()) == 14  # the transcript keeps every message: only the request left some out
    # The status bar says how full the window is (prompt and answer of the last reply), in orange past 90 %.
    used = saved.stats["prompt_tokens"] + saved.stats["tokens"]
    w._update_status()  # what its 500 ms timer does
    assert w.st_ctx.text() == f"context {used:,} / 2,048 ({used / 2048:.0%})"
    assert ("#b35c00" in w.st_ctx.styleSheet()) == (used >= 0.9 * 2048)
    conv_id = w.chat.conv.id  # type: ignore[union-attr]
    w.chat.new_conversation()
    w._update_status()
    assert w.st_ctx.text() == ""  # nothing sent yet in the new chat
    w.chat.open_conversation(conv_id)  # the persisted stats give it back
    w._update_status()
    assert w.st_ctx.text().startswith(f"context {used:,} / 2,048")
    w.chat.open_conversation(conv_id)
    # The next turn keeps that cut (it freed half the window), so its prompt starts as the last one did and the
    # conversation cache gives all but the new turn: the footer says so.
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
        assert w.chat.send("And the one before it?")
    again = blocker.args[0]
    assert again is not None and again.stats["dropped_messages"] == dropped
    assert saved.stats["prompt_tokens"] <= (2048 - 16) / 2  # the cut left half the room free
    assert again.stats["cached_tokens"] >= saved.stats["prompt_tokens"]
    assert f"cached {again.stats['cached_tokens']} tokens" in w.chat.bubbles()[-1].stats_label.text()
    shots = os.environ.get("DYNADRAFT_SHOTS")
    if shots:
        w._update_status()
        qtbot.wait(300)  # the status bar lays its labels out again
        w.grab().save(str(Path(shots) / "context-overflow-dropped.png"))


def test_set_to_stop_the_chat_stops_with_the_engines_message(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=gui_engine, model_label="SmolLM2-135M (test)")
    _long_chat(w, context_overflow="error")
    with qtbot.waitSignal(w.chat.reply_failed, timeout=120_000) as blocker:
        assert w.chat.send("Which part was last?")
    assert "exceeds the context window of 2048 tokens" in blocker.args[0]


def test_the_settings_dialog_offers_both_and_keeps_the_choice(make_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window()
    w.chat.new_conversation()
    conv = w.chat.conv
    assert conv is not None
    dlg = ConversationSettingsDialog(conv, has_draft=False)
    qtbot.addWidget(dlg)
    assert dlg.context_overflow.currentData() == "drop_oldest"  # the default, as LM Studio's rolling window
    assert [dlg.context_overflow.itemData(i) for i in range(dlg.context_overflow.count())] == ["drop_oldest", "error"]
    dlg.context_overflow.setCurrentIndex(dlg.context_overflow.findData("error"))
    system, settings = dlg.values()
    w.chat.apply_settings(system, settings)
    assert w.chat.conv is not None and w.chat.conv.settings["context_overflow"] == "error"
    again = ConversationSettingsDialog(w.chat.conv, has_draft=False)
    qtbot.addWidget(again)
    assert again.context_overflow.currentData() == "error"
