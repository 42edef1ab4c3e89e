"""Can the bundled runtime load a GGUF, and can two GGUFs pair as draft and target? With reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.models.catalog import FALLBACK_FORMAT, Build, Catalog
from app.models.gguf_reader import read_gguf
from app.models.inspection import GGUFReport
from app.models.quant_types import FORK, ROCMFPX_FORK, UNKNOWN

# Same limits as llama.cpp's common/speculative.cpp, so our verdict matches what the engine will accept.
VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5

LOADS = "loads"
NEEDS_FORK = "needs-fork"
UNKNOWN_TYPES = "unknown-types"
INCOMPLETE = "incomplete"


@dataclass
class Compatibility:
    """Verdict for one model file against the bundled runtime."""

    status: str  # LOADS | NEEDS_FORK | UNKNOWN_TYPES | INCOMPLETE
    message: str
    reasons: list[str] = field(default_factory=list)
    alternative: Build | None = None

    @property
    def loads(self) -> bool:
        return self.status == LOADS

    def to_dict(self) -> dict[str, Any]:
        alt = self.alternative
        return {
            "status": self.status,
            "loads": self.loads,
            "message": self.message,
            "reasons": self.reasons,
            "alternative": None
            if alt is None
            else {
                "id": alt.id,
                "format": alt.format,
                "repo": alt.repo,
                "files": list(alt.files),
                "verified": alt.verified,
            },
        }


def check_loadable(report: GGUFReport, catalog: Catalog | None = None) -> Compatibility:
    """'loads' if every tensor type is one the bundled runtime knows, else which runtime it needs and what to get."""
    if report.missing_shards:
        return Compatibility(
            INCOMPLETE,
            f"incomplete split model: missing {', '.join(report.missing_shards)}",
            [f"shard {s} not found next to the first shard" for s in report.missing_shards],
        )
    bad = report.unloadable_types
    if not bad:
        return Compatibility(LOADS, LOADS)
    reasons = [
        f"{q.tensors} tensors of {q.name} (type id {q.type_id})" + (f", a {q.fork} fork type" if q.fork else "")
        for q in bad
    ]
    alternative = None
    if catalog is not None:
        fam = catalog.family_for_file(Path(report.path).name)
        if fam is not None:
            alternative = catalog.fallback_for(fam.id)
    forks = sorted({q.fork for q in bad if q.origin == FORK and q.fork})
    if any(q.origin == UNKNOWN for q in bad):
        status = UNKNOWN_TYPES
        names = ", ".join(q.name for q in bad if q.origin == UNKNOWN)
        message = f"needs a fork runtime: {names} (not in this runtime, not in any known fork table)"
    else:
        status = NEEDS_FORK
        message = f"needs the fork runtime ({', '.join(forks) or ROCMFPX_FORK})"
    if alternative is not None:
        message += f"; the {alternative.format} build '{alternative.id}' loads with the bundled runtime"
    elif catalog is not None:
        message += f"; no {FALLBACK_FORMAT} build of this model in the catalog"
    return Compatibility(status, message, reasons, alternative)


@dataclass(frozen=True)
class Vocab:
    """Tokenizer facts read from a GGUF header (full token list)."""

    model: str | None
    tokens: list[str]
    bos_id: int | None
    eos_id: int | None
    add_bos: bool | None
    add_eos: bool | None


@dataclass
class VocabCheck:
    """Whether a draft can speculate for a target, with every reason it can't."""

    compatible: bool
    reasons: list[str] = field(default_factory=list)
    draft_vocab: int = 0
    target_vocab: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "compatible": self.compatible,
            "reasons": self.reasons,
            "draft_vocab": self.draft_vocab,
            "target_vocab": self.target_vocab,
        }


def read_vocab(path: str | Path) -> Vocab:
    g = read_gguf(path)
    tokens = g.get("tokenizer.ggml.tokens") or []
    return Vocab(
        model=g.get("tokenizer.ggml.model"),
        tokens=list(tokens),
        bos_id=g.get("tokenizer.ggml.bos_token_id"),
        eos_id=g.get("tokenizer.ggml.eos_token_id"),
        add_bos=g.get("tokenizer.ggml.add_bos_token"),
        add_eos=g.get("tokenizer.ggml.add_eos_token"),
    )


def compare_vocabs(draft: Vocab, target: Vocab) -> VocabCheck:
    """The checks llama.cpp applies before speculative decoding (tokenizer type, size, bos/eos, token texts)."""
    reasons: list[str] = []
    if draft.model != target.model:
        reasons.append(f"tokenizer type differs: draft {draft.model!r}, target {target.model!r}")
    if draft.bos_id != target.bos_id:
        reasons.append(f"bos token id differs: draft {draft.bos_id}, target {target.bos_id}")
    if draft.eos_id != target.eos_id:
        reasons.append(f"eos token id differs: draft {draft.eos_id}, target {target.eos_id}")
    # An absent add_bos/add_eos key means "the tokenizer type's default", so only two explicit values can clash.
    if None not in (draft.add_bos, target.add_bos) and draft.add_bos != target.add_bos:
        reasons.append(f"add_bos_token differs: draft {draft.add_bos}, target {target.add_bos}")
    if None not in (draft.add_eos, target.add_eos) and draft.add_eos != target.add_eos:
        reasons.append(f"add_eos_token differs: draft {draft.add_eos}, target {target.add_eos}")
    nd, nt = len(draft.tokens), len(target.tokens)
    if not nd or not nt:
        reasons.append("token list missing from " + ("the draft" if not nd else "the target"))
    elif abs(nd - nt) > VOCAB_MAX_SIZE_DIFFERENCE:
        reasons.append(
            f"vocab sizes differ by {abs(nd - nt)} (draft {nd}, target {nt}; at most "
            f"{VOCAB_MAX_SIZE_DIFFERENCE} allowed)"
        )
    if nd and nt:
        for i in range(VOCAB_CHECK_START_TOKEN_ID, min(nd, nt)):
            if draft.tokens[i] != target.tokens[i]:
                reasons.append(f"token {i} differs: draft {draft.tokens[i]!r}, target {target.tokens[i]!r}")
                break
    return VocabCheck(not reasons, reasons, nd, nt)


def check_pair(draft_path: str | Path, target_path: str | Path) -> VocabCheck:
    """Vocabulary compatibility of a draft GGUF with a target GGUF, from their headers only."""
    return compare_vocabs(read_vocab(draft_path), read_vocab(target_path))
