"""Streaming text: whole UTF-8 characters only, stop strings matched across token boundaries."""

from __future__ import annotations

from app.engine.chat import TextStream, render_chat


def test_multibyte_character_split_across_tokens_is_held_until_complete() -> None:
    ts = TextStream()
    data = "é😀".encode()
    out = [ts.push(data[i : i + 1]) for i in range(len(data))]
    assert out == ["", "é", "", "", "", "😀"]
    assert ts.flush() == ""


def test_incomplete_tail_is_dropped_not_shown_as_replacement() -> None:
    ts = TextStream()
    assert ts.push(b"ok" + "😀".encode()[:2]) == "ok"
    assert ts.flush() == ""
    assert ts.text == "ok"


def test_stop_string_across_pieces() -> None:
    ts = TextStream(stop=("END",))
    assert ts.push(b"hello E") == "hello "
    assert ts.push(b"N") == ""
    assert ts.push(b"D more") == ""
    assert ts.stopped and ts.text == "hello "


def test_false_stop_prefix_is_released() -> None:
    ts = TextStream(stop=("END",))
    assert ts.push(b"an E") == "an "
    assert ts.push(b"gg") == "Egg"
    assert ts.flush() == ""
    assert not ts.stopped


def test_render_chat_uses_the_template() -> None:
    tmpl = "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}[a]{% endif %}"
    assert render_chat(tmpl, [{"role": "user", "content": "hi"}]) == "[user]hi[a]"
