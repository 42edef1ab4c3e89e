"""A conversation as a file: Markdown to read and share, JSON that imports back with its settings and reply stats."""

from __future__ import annotations

import json
from typing import Any

from app.gui.store import ChatStore, Conversation, Message

FORMAT = "dynadraft-chat"
VERSION = 1
ROLES = ("system", "user", "assistant")


class ChatImportError(ValueError):
    """The file is not a DynaDraft chat export this version reads; the message says why."""


def to_json(conv: Conversation, messages: list[Message]) -> str:
    """The conversation with its settings and every message (assistant replies keep their stats)."""
    return json.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "title": conv.title,
            "system_prompt": conv.system_prompt,
            "settings": conv.settings,
            "created": conv.created,
            "messages": [
                {"role": m.role, "content": m.content, "stats": m.stats, "created": m.created} for m in messages
            ],
        },
        indent=2,
        ensure_ascii=False,
    )


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
    return data


def import_json(store: ChatStore, text: str) -> Conversation:
    """A new conversation from an export (the original is never overwritten); ChatImportError for a file that is not
    one, before anything is written."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise ChatImportError(f"not valid JSON ({e})") from e
    data = _checked(raw)
    title = str(data.get("title") or "Imported chat")
    conv = store.create_conversation(title, str(data.get("system_prompt", "")), dict(data.get("settings", {})))
    for m in data["messages"]:
        stats = m.get("stats") if isinstance(m.get("stats"), dict) else None
        store.add_message(conv.id, m["role"], m["content"], stats)
    return conv
