"""Conversation cache: sequence-state checkpoints keyed by token prefix, in host RAM under a byte budget (LRU)."""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.runtime.llama import Context, LlamaError, common_prefix

log = logging.getLogger(__name__)

MIB = 1024 * 1024
DEFAULT_MAX_BYTES = 8192 * MIB  # llama-server's --cache-ram default
MIN_TOKENS = 16  # a state this short re-prefills in a blink: not worth a copy
DEFAULT_CHECKPOINTS = 4  # recurrent/hybrid checkpoints kept per conversation (chain of prefixes)


def available_memory() -> int | None:
    """Bytes of memory the OS could give us now (Linux MemAvailable, Windows ullAvailPhys), or None if unknown."""
    try:
        if sys.platform == "win32":

            class _MemStatus(ctypes.Structure):
                _fields_ = [("dwLength", ctypes.c_ulong), ("dwMemoryLoad", ctypes.c_ulong)] + [
                    (n, ctypes.c_ulonglong)
                    for n in ("total", "avail", "total_pf", "avail_pf", "total_v", "avail_v", "avail_ext")
                ]

            st = _MemStatus()
            st.dwLength = ctypes.sizeof(_MemStatus)
            if ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(st)):  # type: ignore[attr-defined]
                return int(st.avail)
            return None
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None


def default_budget(available: int | None) -> int:
    """The RAM budget when none is configured: a quarter of what is free now, at most llama-server's 8 GiB."""
    if available is None:
        return 1024 * MIB
    return max(0, min(DEFAULT_MAX_BYTES, available // 4))


def budget_bytes(cache_ram_mib: int | None) -> int:
    """--cache-ram in MiB (0: off, -1 or None: sized from free memory) as a byte budget."""
    if cache_ram_mib is None or cache_ram_mib < 0:
        return default_budget(available_memory())
    return cache_ram_mib * MIB


@dataclass
class Entry:
    """One saved sequence state: the tokens it holds (in position order) and llama.cpp's serialised state."""

    owner: str  # which context it belongs to ("target", "draft", ...)
    tokens: tuple[int, ...]
    data: bytes
    used: int = 0  # LRU clock
    extra: bytes = b""  # an Attachment's state saved with it (b"": none, e.g. written before attachments existed)

    @property
    def nbytes(self) -> int:
        return len(self.data) + len(self.extra) + 4 * len(self.tokens)


class Attachment(Protocol):
    """State that lives beside a context's memory and must come back with it (the MTP source's own context and the
    target's last hidden row): saved with each of the context's checkpoints and handed back when one is restored."""

    def checkpoint_state(self, tokens: Sequence[int]) -> bytes | None:
        """Its state matching the context holding `tokens`, or None when it has none to give."""
        ...

    def restored(self, tokens: Sequence[int], state: bytes | None) -> None:
        """The context was restored to `tokens` from a checkpoint carrying `state` (None: it carried nothing)."""
        ...


class Spill(Protocol):
    """Where states outlive the process (cache_disk.DiskStore): read once at start, written at close."""

    def load(self) -> list[Entry]: ...

    def save(self, entries: list[Entry]) -> None: ...


@dataclass
class CacheStats:
    """Counters for /metrics and benchmarks (totals since the session started)."""

    hits: int = 0  # requests that reused cached tokens (from the live context or a restored state)
    restores: int = 0  # of which restored a saved state
    misses: int = 0  # requests that prefilled everything
    evictions: int = 0  # states dropped for the byte budget
    saves: int = 0
    cached_tokens: int = 0  # prompt tokens not prefilled thanks to the cache

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def is_prefix(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) <= len(b) and common_prefix(a, b) == len(a)


def reusable(entry_tokens: Sequence[int], prompt: Sequence[int], limit: int, recurrent: bool) -> int:
    """How many leading tokens of `prompt` (at most `limit`) a state holding `entry_tokens` gives for free.

    Attention KV drops any suffix, so a common prefix is enough; recurrent state cannot be cut back, so the whole
    state must be a prefix of the prompt.
    """
    n = common_prefix(entry_tokens, prompt)
    if recurrent:
        return len(entry_tokens) if n == len(entry_tokens) and n <= limit else 0
    return min(n, limit)


@dataclass
class PromptCache:
    """Saved states of several contexts, LRU under one byte budget (pure bookkeeping: no llama.cpp calls)."""

    budget: int
    entries: list[Entry] = field(default_factory=list)
    stats: CacheStats = field(default_factory=CacheStats)
    _clock: int = 0

    @property
    def bytes_held(self) -> int:
        return sum(e.nbytes for e in self.entries)

    def touch(self, entry: Entry) -> None:
        self._clock += 1
        entry.used = self._clock

    def best(self, owner: str, prompt: Sequence[int], limit: int, recurrent: bool) -> tuple[Entry | None, int]:
        """The entry of `owner` that gives the most leading tokens of `prompt`, and how many."""
        found, n_best = None, 0
        for e in self.entries:
            if e.owner == owner:
                n = reusable(e.tokens, prompt, limit, recurrent)
                if n > n_best:
                    found, n_best = e, n
        return found, n_best

    def covers(self, owner: str, tokens: Sequence[int], recurrent: bool) -> bool:
        """Whether a saved state already gives everything `tokens` would (so saving it again adds nothing)."""
        for e in self.entries:
            if e.owner == owner and (tuple(tokens) == e.tokens or (not recurrent and is_prefix(tokens, e.tokens))):
                return True
        return False

    def put(self, entry: Entry, max_chain: int) -> list[Entry]:
        """Add `entry`; drop states it makes redundant, keep at most `max_chain` prefixes of it (a conversation's
        checkpoints), then evict least recently used states until the budget holds. Returns what was dropped."""
        dropped: list[Entry] = []
        if entry.nbytes > self.budget:
            return [entry]
        ancestors = [e for e in self.entries if e.owner == entry.owner and is_prefix(e.tokens, entry.tokens)]
        ancestors.sort(key=lambda e: e.used)
        excess = len(ancestors) + 1 - max(1, max_chain)
        for e in ancestors[: max(0, excess)]:
            self.entries.remove(e)
            dropped.append(e)
        self.touch(entry)
        self.entries.append(entry)
        while self.bytes_held > self.budget:
            victim = min((e for e in self.entries if e is not entry), key=lambda e: e.used)
            self.entries.remove(victim)
            dropped.append(victim)
            self.stats.evictions += 1
        self.stats.saves += 1
        return dropped

    def remove(self, entry: Entry) -> None:
        if entry in self.entries:
            self.entries.remove(entry)

    def snapshot(self) -> dict[str, int]:
        """Totals and sizes for responses and /metrics."""
        return {**self.stats.to_dict(), "bytes": self.bytes_held, "entries": len(self.entries), "budget": self.budget}


class ContextCache:
    """The cache rule for one llama.cpp context: before a request, make it hold the longest reusable prefix of the
    prompt (its live tokens or a restored state), saving what it would otherwise lose; checkpoint on request."""

    def __init__(
        self,
        ctx: Context,
        store: PromptCache,
        owner: str,
        checkpoints: int = DEFAULT_CHECKPOINTS,
        attachment: Attachment | None = None,
    ) -> None:
        self.ctx = ctx
        self.store = store
        self.owner = owner
        self.attachment = attachment
        self.recurrent = ctx.model.is_recurrent
        # Attention KV drops any suffix, so a longer state subsumes its prefixes: one per conversation is enough.
        self.max_chain = checkpoints if self.recurrent else 1

    def prepare(self, prompt: Sequence[int], limit: int) -> int:
        """Leave the context holding a prefix of `prompt` of at most `limit` tokens, as long as the cache allows;
        returns its length (the tokens the caller need not prefill)."""
        ctx = self.ctx
        if limit <= 0:  # the caller wants a full prefill (cache_prompt off): nothing to reuse, nothing to save
            ctx.clear()
            return 0
        live = reusable(ctx.tokens, prompt, limit, self.recurrent)
        entry, n_entry = self.store.best(self.owner, prompt, limit, self.recurrent)
        restore = entry if (entry is not None and n_entry > live) else None
        if self._loses_much(common_prefix(ctx.tokens, prompt)):
            self.stash()  # another conversation (or a big edit): keep its state for when it comes back
        if restore is not None:
            try:
                ctx.load_state((restore.data, list(restore.tokens)))
            except LlamaError as e:  # a state llama.cpp refuses (e.g. a damaged file): forget it, start over
                log.warning("dropping a prompt-cache state that could not be restored: %s", e)
                self.store.remove(restore)
                ctx.clear()
                return 0
            self.store.touch(restore)
            self.store.stats.restores += 1
            # The attachment's state fits the whole restored state; recurrent memory keeps all of it. (An attention
            # context cut below it next leaves the MTP head one row short: it then drafts nothing, as it says.)
            if self.attachment is not None:
                self.attachment.restored(restore.tokens, restore.extra or None)
            live = n_entry
        if not ctx.truncate(live):
            ctx.clear()
        return len(ctx.tokens)

    def _loses_much(self, shared: int) -> bool:
        """Whether the live state, of which the new prompt shares `shared` leading tokens, is worth a copy before
        it is overwritten: yes for another conversation or a big edit; no for a small tail (a reply the template
        re-renders, a regenerated answer), which the prompt's own checkpoint covers or is cheap to prefill again."""
        lost = len(self.ctx.tokens) - shared
        return lost >= MIN_TOKENS and 4 * lost >= len(self.ctx.tokens)

    def stash(self) -> None:
        """Save the live state before it is overwritten, unless it is short or already saved."""
        tokens = self.ctx.tokens
        if len(tokens) >= MIN_TOKENS and not self.store.covers(self.owner, tokens, self.recurrent):
            self.save()

    def checkpoint(self) -> None:
        """Save the live state now if only a checkpoint can bring it back later (recurrent memory)."""
        if self.recurrent:
            self.stash()

    def save(self) -> None:
        if self.store.budget <= 0:
            return
        try:
            data, tokens = self.ctx.save_state()
        except LlamaError as e:
            log.warning("prompt cache: %s", e)
            return
        extra = self.attachment.checkpoint_state(tokens) if self.attachment is not None else None
        self.store.put(Entry(self.owner, tuple(tokens), data, extra=extra or b""), self.max_chain)


def record_request(stats: CacheStats, cache_n: int) -> None:
    """Count one request as a hit (some prompt tokens reused) or a miss."""
    if cache_n > 0:
        stats.hits += 1
        stats.cached_tokens += cache_n
    else:
        stats.misses += 1


def restorable(entries: Iterable[Entry], budget: int) -> list[Entry]:
    """The most recently used entries that fit the budget together (for loading a persisted cache)."""
    out: list[Entry] = []
    total = 0
    for e in sorted(entries, key=lambda e: e.used, reverse=True):
        if total + e.nbytes <= budget:
            out.append(e)
            total += e.nbytes
    return out


class ConversationCache:
    """A session's conversation cache: one store shared by its contexts (the target's first, then a draft's or
    another drafter's, which follow the same rule), optionally persisted to a folder across restarts."""

    def __init__(
        self,
        store: PromptCache,
        contexts: dict[str, Context],
        checkpoints: int,
        disk: Spill | None,
        attachments: Mapping[str, Attachment] | None = None,
    ):
        self.store = store
        att = attachments or {}
        self.caches = [ContextCache(ctx, store, name, checkpoints, att.get(name)) for name, ctx in contexts.items()]
        self.disk = disk
        if disk is not None:
            for e in restorable(disk.load(), store.budget):
                store.entries.append(e)
                store.touch(e)

    @classmethod
    def open(
        cls,
        cache_ram_mib: int | None,
        checkpoints: int,
        contexts: dict[str, Context],
        disk: Spill | None = None,
        attachments: Mapping[str, Attachment] | None = None,
    ) -> ConversationCache:
        return cls(PromptCache(budget_bytes(cache_ram_mib)), contexts, checkpoints, disk, attachments)

    @property
    def target(self) -> ContextCache:
        return self.caches[0]

    def prepare(self, prompt: Sequence[int], use_cache: bool) -> int:
        """Before prefilling `prompt`: every context restored to its best prefix; returns the target's length.
        At least the last prompt token is always decoded again (its logits start the generation)."""
        limit = len(prompt) - 1 if use_cache else 0
        n = self.target.prepare(prompt, limit)
        for other in self.caches[1:]:
            other.prepare(prompt, limit)
        if use_cache:
            record_request(self.store.stats, n)
        return n

    def checkpoint(self, prompt: Sequence[int], use_cache: bool, uses_draft: bool) -> None:
        """After the prompt is processed: checkpoint recurrent memories at its end (a later request that shares the
        prompt but not this reply, e.g. a template that re-renders the reply, resumes there)."""
        if not use_cache:
            return
        self.target.checkpoint()
        for other in self.caches[1:]:
            if other.recurrent and uses_draft and is_prefix(other.ctx.tokens, prompt):
                try:  # the draft would prefill this at its first proposal anyway
                    other.ctx.prefill(prompt[len(other.ctx.tokens) :])
                except LlamaError:
                    other.ctx.clear()
                    continue
                other.checkpoint()

    def snapshot(self) -> dict[str, int]:
        return self.store.snapshot()

    def close(self) -> None:
        """Persist (when a folder is configured): the live states first, then every saved state within budget."""
        if self.disk is None:
            return
        for c in self.caches:
            if c.ctx.ptr:
                c.stash()
        try:
            self.disk.save(self.store.entries)
        except OSError as e:
            log.warning("could not persist the prompt cache: %s", e)
