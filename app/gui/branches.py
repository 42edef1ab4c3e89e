"""A chat's branches as a tree of messages: the active path through it, and each message's place among its versions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class Node(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def parent_id(self) -> int | None: ...


N = TypeVar("N", bound=Node)


def active_path(tree: Sequence[N]) -> list[N]:
    """The active branch, first message to last. `tree` lists every message least recently chosen first (as
    ChatStore.tree gives it), so the active child of each message, and the active first message, is the last one
    listed after it."""
    active: dict[int | None, N] = {}
    for each in tree:
        active[each.parent_id] = each
    path: list[N] = []
    seen: set[int] = set()
    node = active.get(None)
    while node is not None and node.id not in seen:  # `seen`: a damaged row that is its own ancestor ends the path
        path.append(node)
        seen.add(node.id)
        node = active.get(node.id)
    return path


def positions(tree: Sequence[Node]) -> dict[int, tuple[int, int]]:
    """Each message's place among its versions (the messages after the same parent), oldest first: id -> (i, n),
    i counting from 1, as the `‹ i/n ›` control shows it."""
    groups: dict[int | None, list[int]] = {}
    for node in tree:
        groups.setdefault(node.parent_id, []).append(node.id)
    out: dict[int, tuple[int, int]] = {}
    for ids in groups.values():
        for i, message_id in enumerate(sorted(ids), 1):
            out[message_id] = (i, len(ids))
    return out


def up_to(path: Sequence[N], message_id: int | None) -> list[N]:
    """The path as far as `message_id` (included; nothing for None, the whole path if it is not on it): what a
    reply after that message sees."""
    if message_id is None:
        return []
    ids = [node.id for node in path]
    return list(path[: ids.index(message_id) + 1]) if message_id in ids else list(path)
