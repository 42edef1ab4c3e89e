"""A conversation as a file: Markdown to read and share, JSON that imports back with its settings, reply stats and
branches."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.gui.store import ChatStore, Conversation, Message

FORMAT = "dynadraft-chat"
VERSION = 1
ROLES = ("system", "user", "assistant")


class ChatImportError(ValueError):
    """The file is not a DynaDraft chat export this version reads; the message says why."""


def _entry(m: Message, parent: bool = False) -> dict[str, Any]:
    out = {"id": m.id, "role": m.role, "content": m.content, "stats": m.stats, "created": m.created}
    return {**out, "parent": m.parent_id} if parent else out


def to_json(conv: Conversation, messages: Sequence[Message], tree: Sequence[Message] = ()) -> str:
    """The conversation with its settings and its active path as `messages` (assistant replies keep their stats).

    With the chat's `tree` (ChatStore.tree), the other branches follow as `branches`, each message with its
    `parent` id, in the tree's order (least recently chosen first, which import keeps). A reader that knows only
    `messages` still gets the chat as it reads now, so the format's version stays 1."""
    on_path = {m.id for m in messages}
    data: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "title": conv.title,
        "system_prompt": conv.system_prompt,
        "settings": conv.settings,
        "created": conv.created,
        "messages": [_entry(m) for m in messages],
    }
    if others := [_entry(m, parent=True) for m in tree if m.id not in on_path]:
        data["branches"] = others
    return json.dumps(data, indent=2, ensure_ascii=False)


def to_markdown(conv: Conversation, messages: list[Message]) -> str:
    """A readable transcript: the title, the system prompt, then each message under its role."""
    out = [f"# {conv.title}", ""]
    if conv.system_prompt.strip():
        out += ["**System**", "", conv.system_prompt.strip(), ""]
    for m in messages:
        out += [f"**{m.role.capitalize()}**", "", m.content.strip(), ""]
        spec = (m.stats or {}).get("spec")
        if m.role == "assistant" and (tps := (m.stats or {}).get("tok_s")):
            out += [f"*{float(tps):.1f} tok/s" + (f", {spec}*" if spec else "*"), ""]
    return "\n".join(out).rstrip() + "\n"


def _checked(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ChatImportError('not a DynaDraft chat export (its "format" is not "dynadraft-chat")')
    if data.get("version") != VERSION:
        raise ChatImportError(f"export version {data.get('version')!r}; this DynaDraft reads version {VERSION}")
    msgs = data.get("messages")
    if not isinstance(msgs, list) or not all(
        isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str) for m in msgs
    ):
        raise ChatImportError("its messages must each have a role (system, user, assistant) and text content")
    if not isinstance(data.get("settings", {}), dict) or not isinstance(data.get("system_prompt", ""), str):
        raise ChatImportError("its settings must be an object and its system prompt text")
    others = data.get("branches", [])
    if not isinstance(others, list) or not all(
        isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str) for m in others
    ):
        raise ChatImportError("its branches must be a list of messages like its messages")
    return data


Followers = dict[Any, list[tuple[Any, dict[str, Any]]]]  # parent key (None: none) -> [(key, message)]


def _followers(data: dict[str, Any]) -> Followers:
    """Who follows whom, keyed by the file's ids (by position for a chat without branches), each list least recently
    chosen first: the branches as listed, then the active path's message."""
    path, others = data["messages"], data.get("branches", [])
    if not others:  # a linear chat (every export before branches): each message follows the one before
        return {(i - 1 if i else None): [(i, m)] for i, m in enumerate(path)}
    ids = [m.get("id") for m in path + others]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids) or len(set(ids)) != len(ids):
        raise ChatImportError("with branches, every message needs its own integer id")
    out: Followers = {}
    for m in others:
        if m.get("parent") is not None and m.get("parent") not in ids:
            raise ChatImportError(f"branch message {m['id']} follows message {m.get('parent')!r}, which is not there")
        out.setdefault(m.get("parent"), []).append((m["id"], m))
    for parent, m in zip([None, *ids[: len(path) - 1]], path, strict=True):
        out.setdefault(parent, []).append((m["id"], m))
    return out


def _write_order(followers: Followers) -> list[tuple[Any, Any, dict[str, Any]]]:
    """(key, parent key, message), every parent before its followers, and versions in the order they were written
    (by id), so each keeps its `i/n`."""
    out: list[tuple[Any, Any, dict[str, Any]]] = []
    todo: list[Any] = [None]
    while todo:
        parent = todo.pop()
        for key, m in sorted(followers.get(parent, []), key=lambda km: km[0]):
            out.append((key, parent, m))
            todo.append(key)
    return out


def import_json(store: ChatStore, text: str) -> Conversation:
    """A new conversation from an export (the original is never overwritten); ChatImportError for a file that is not
    one, before anything is written."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise ChatImportError(f"not valid JSON ({e})") from e
    data = _checked(raw)
    followers = _followers(data)
    order = _write_order(followers)
    if len(order) != len(data["messages"]) + len(data.get("branches", [])):
        raise ChatImportError("some branch messages do not follow from the first message (their parents loop)")
    title = str(data.get("title") or "Imported chat")
    conv = store.create_conversation(title, str(data.get("system_prompt", "")), dict(data.get("settings", {})))
    saved: dict[Any, Message | None] = {None: None}
    for key, parent, m in order:
        stats = m.get("stats") if isinstance(m.get("stats"), dict) else None
        above = saved[parent]
        saved[key] = store.add_child(conv.id, above.id if above else None, m["role"], m["content"], stats)
    for versions in followers.values():  # the version used last, of those with several, is active again
        if len(versions) > 1 and (last := saved[versions[-1][0]]) is not None:
            store.choose(last)
    return conv
