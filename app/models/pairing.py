"""The draft to propose for a target GGUF: the catalog's pair on disk, else a much smaller same-vocabulary GGUF."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.models.catalog import Catalog
from app.models.compat import Vocab, compare_vocabs, read_vocab
from app.models.gguf_reader import GGUFError
from app.models.inspection import shard_names
from app.models.local import local_ggufs

CATALOG_REASON = "paired by the catalog"
LOCAL_REASON = "same tokenizer, on disk"
# A draft pays off only when it is much cheaper than the target: at most this share of the target's bytes.
MAX_DRAFT_SHARE = 0.25


@dataclass(frozen=True)
class DraftProposal:
    """A draft file for a target, and why it was picked (CATALOG_REASON or LOCAL_REASON)."""

    path: Path
    reason: str


def model_bytes(path: Path) -> int:
    """A model's size on disk, every shard of a split GGUF included."""
    return sum(p.stat().st_size for p in (path.with_name(n) for n in shard_names(path.name)) if p.is_file())


@functools.lru_cache(maxsize=8)
def _vocab(path: str, size: int, mtime_ns: int) -> Vocab:
    return read_vocab(path)


def cached_vocab(path: Path) -> Vocab:
    """The file's vocabulary, read once per file version: a large vocabulary's header takes a noticeable while."""
    st = path.stat()
    return _vocab(str(path.resolve()), st.st_size, st.st_mtime_ns)


def catalog_draft(target: Path, catalog: Catalog, candidates: list[Path]) -> Path | None:
    """The local file of the draft build the catalog pairs with the target's build, if it is on disk."""
    build = catalog.build_for_file(target.name)
    draft = catalog.draft_for(build) if build is not None else None
    if draft is None or draft.kind != "model" or not draft.build:
        return None  # MTP, DFlash and prompt lookup need no second file
    draft_build = catalog.builds.get(draft.build)
    if draft_build is None or draft_build.first_file is None:
        return None
    name = draft_build.first_file.rsplit("/", 1)[-1].lower()
    return next((p for p in candidates if p.name.lower() == name), None)


def same_vocab_draft(target: Path, candidates: list[Path]) -> Path | None:
    """The largest candidate under MAX_DRAFT_SHARE of the target's size whose vocabulary llama.cpp accepts for it."""
    limit = model_bytes(target) * MAX_DRAFT_SHARE
    small = [(size, p) for p in candidates if (size := model_bytes(p)) < limit]
    if not small:
        return None  # nothing small enough: no header needs reading, not even the target's
    try:
        target_vocab = cached_vocab(target)
    except (GGUFError, OSError):
        return None
    for _size, p in sorted(small, key=lambda sp: sp[0], reverse=True):
        try:
            if compare_vocabs(cached_vocab(p), target_vocab).compatible:
                return p
        except (GGUFError, OSError):
            continue  # an unreadable file is no draft; the Models tab says what is wrong with it
    return None


def propose_draft(
    target: str | Path, catalog: Catalog | None = None, roots: Iterable[Path] | None = None
) -> DraftProposal | None:
    """The draft to offer with `target`: the catalog's pair if downloaded, else a same-tokenizer local GGUF under a
    quarter of its size, else None. Reads GGUF headers only (cached per file), but can still take a moment with
    large vocabularies: call it off the GUI thread."""
    path = Path(target)
    if not path.is_file():
        return None
    own = {path.resolve(), *(path.with_name(n).resolve() for n in shard_names(path.name))}
    candidates = [p for p in local_ggufs(roots) if p.resolve() not in own]
    found = catalog_draft(path, catalog, candidates) if catalog is not None else None
    if found is not None:
        return DraftProposal(found, CATALOG_REASON)
    found = same_vocab_draft(path, candidates)
    return DraftProposal(found, LOCAL_REASON) if found is not None else None
