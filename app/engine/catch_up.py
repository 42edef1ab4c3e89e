"""A draft model's catch-up (the history its KV lacks, prefilled before its next draft): priced in ms from its
measured prefill speed, which the source memory keeps across restarts."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.engine.memory import SourceMemoryStore
from app.speculative.sources import DraftSource, catch_up_ms

Store = Callable[[], SourceMemoryStore | None]  # Session.source_memory: opened on first use


def recall_prefill_speed(store: Store, name: str, src: object) -> None:
    """A draft source not yet timed in this session starts from the prefill sums the memory kept."""
    sums = getattr(src, "prefill_sums", None)
    if sums is None or sums[0] > 0.0 or (opened := store()) is None:
        return
    if (sums := opened.prefill_sums(name)) is not None:
        src.prefill_sums = sums  # type: ignore[attr-defined]


def keep_prefill_speeds(store: SourceMemoryStore | None, sources: Mapping[str, DraftSource]) -> None:
    """Each draft source's measured prefill speed into the source memory, once opened (a request that weighed a
    catch-up or learnt costs opened it), so a restart weighs its first long prompt too."""
    if store is None:
        return
    for name, src in sources.items():
        sums = getattr(src, "prefill_sums", None)
        if sums is not None and sums[0] > 0:
            store.record_prefill_sums(name, sums)


def prompt_catch_up_ms(store: Store, name: str, src: object, prompt: list[int]) -> float | None:
    """What the draft source `name` pays before drafting for this prompt (None: it keeps no KV of its own)."""
    if not hasattr(src, "kv_prefix"):
        return None
    recall_prefill_speed(store, name, src)
    return catch_up_ms(src, len(prompt) - src.kv_prefix(prompt))


def pool_catch_up_ms(
    store: Store, sources: Mapping[str, DraftSource], available: set[str], kv_held: dict[str, int], history: list[int]
) -> dict[str, float]:
    """Each available pool source's one-off ms before its next draft. `kv_held` (the run's) is read from a source
    once per request, then followed by the loop; the history's last token is committed but not yet decoded."""
    out = {}
    for name in available:
        src = sources[name]
        if not hasattr(src, "kv_prefix"):
            continue
        if name not in kv_held:
            recall_prefill_speed(store, name, src)
            kv_held[name] = src.kv_prefix(history)
        out[name] = catch_up_ms(src, len(history) - 1 - kv_held[name])
    return out
