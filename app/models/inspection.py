"""Describe a GGUF file without loading it: architecture, size, context, template, quant mix, split shards."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.models.gguf_reader import GGUFError, GGUFFile, read_gguf
from app.models.quant_types import FORK, MAINLINE, UNKNOWN, name_file_type, name_tensor_type

SPLIT_RE = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")
# Token lists are only needed for the draft/target check; the report itself keeps their length.
_REPORT_MAX_ARRAY = 1024


@dataclass(frozen=True)
class QuantShare:
    """Tensors of one raw type id: how many, how many weights, how many bytes on disk."""

    type_id: int
    name: str
    origin: str
    fork: str | None
    tensors: int
    elements: int
    nbytes: int


@dataclass(frozen=True)
class TokenizerSummary:
    """The tokenizer facts that decide draft/target pairing."""

    model: str | None
    vocab_size: int | None
    bos_id: int | None
    eos_id: int | None


@dataclass
class GGUFReport:
    """What `dynadraft models --inspect` prints; built from the header only."""

    path: str
    file_size: int
    gguf_version: int
    architecture: str | None
    name: str | None
    parameter_count: int
    context_length: int | None
    chat_template: bool
    file_type: int | None
    file_type_name: str | None
    format: str
    quant_mix: list[QuantShare]
    tokenizer: TokenizerSummary
    split_count: int = 1
    shards: list[str] = field(default_factory=list)
    missing_shards: list[str] = field(default_factory=list)
    mtp_layers: int = 0  # multi-token-prediction (NextN) blocks: the model can draft for itself ("mtp" source)

    @property
    def needs_fork(self) -> bool:
        return any(q.origin != MAINLINE for q in self.quant_mix)

    @property
    def unloadable_types(self) -> list[QuantShare]:
        return [q for q in self.quant_mix if q.origin != MAINLINE]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def split_info(path: Path) -> tuple[int, int] | None:
    """(index, count) from a llama.cpp split name like model-00001-of-00003.gguf (1-based), else None."""
    m = SPLIT_RE.match(path.name)
    return (int(m["index"]), int(m["count"])) if m else None


def shard_names(filename: str) -> list[str]:
    """Every shard name of a split GGUF given any one of them; a single-file model gives itself."""
    folder, _, base = filename.rpartition("/")
    m = SPLIT_RE.match(base)
    if not m:
        return [filename]
    count = int(m["count"])
    prefix = f"{folder}/" if folder else ""
    return [f"{prefix}{m['stem']}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


def _arch_key(g: GGUFFile, suffix: str) -> Any:
    arch = g.get("general.architecture")
    return g.get(f"{arch}.{suffix}") if arch else None


def _context_length(g: GGUFFile) -> int | None:
    return _int_or_none(_arch_key(g, "context_length"))


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _format_label(file_type_name: str | None, mix: list[QuantShare]) -> str:
    if file_type_name and not file_type_name.startswith("unknown"):
        return file_type_name
    # No (known) general.file_type: name the file after the type holding most bytes, which is what users mean.
    if not mix:
        return "empty"
    top = max(mix, key=lambda q: q.nbytes)
    return top.name


def quant_mix(files: list[GGUFFile], file_type: int | None) -> list[QuantShare]:
    """Group tensors of all shards by raw type id; sorted by bytes, largest first."""
    acc: dict[int, list[int]] = {}
    for g in files:
        sizes = g.tensor_nbytes()
        for t in g.tensors:
            row = acc.setdefault(t.type_id, [0, 0, 0])
            row[0] += 1
            row[1] += t.n_elements
            row[2] += sizes.get(t.name, 0)
    shares = []
    for type_id, (n, elements, nbytes) in acc.items():
        tn = name_tensor_type(type_id, file_type)
        shares.append(QuantShare(type_id, tn.name, tn.origin, tn.fork, n, elements, nbytes))
    return sorted(shares, key=lambda q: (-q.nbytes, q.type_id))


def inspect_gguf(path: str | Path) -> GGUFReport:
    """Report on a GGUF file (any shard of a split model: the others are read from the same folder if present)."""
    p = Path(path)
    names = shard_names(p.name)
    shard_paths = [p.with_name(n) for n in names]
    first = shard_paths[0]
    head = read_gguf(first if first.is_file() else p, max_array=_REPORT_MAX_ARRAY)
    files = [head]
    missing: list[str] = []
    for sp in shard_paths[1:]:
        if sp.is_file():
            files.append(read_gguf(sp, max_array=0))
        else:
            missing.append(sp.name)
    if not first.is_file():
        missing.insert(0, first.name)
    file_type = _int_or_none(head.get("general.file_type"))
    ft_name, _ = name_file_type(file_type)
    mix = quant_mix(files, file_type)
    vocab = head.array_lengths.get("tokenizer.ggml.tokens")
    template = head.get("tokenizer.chat_template")
    return GGUFReport(
        path=str(first if first.is_file() else p),
        file_size=sum(g.file_size for g in files),
        gguf_version=head.version,
        architecture=head.get("general.architecture"),
        name=head.get("general.name"),
        parameter_count=sum(q.elements for q in mix),
        context_length=_context_length(head),
        chat_template=bool(template) and isinstance(template, str),
        file_type=file_type,
        file_type_name=ft_name,
        format=_format_label(ft_name, mix),
        quant_mix=mix,
        tokenizer=TokenizerSummary(
            model=head.get("tokenizer.ggml.model"),
            vocab_size=vocab,
            bos_id=_int_or_none(head.get("tokenizer.ggml.bos_token_id")),
            eos_id=_int_or_none(head.get("tokenizer.ggml.eos_token_id")),
        ),
        split_count=_int_or_none(head.get("split.count")) or len(names),
        shards=[str(sp) for sp in shard_paths] if len(names) > 1 else [],
        missing_shards=missing,
        mtp_layers=_int_or_none(_arch_key(head, "nextn_predict_layers")) or 0,
    )


def trained_context(path: str | Path) -> int | None:
    """The model's training context (its `<arch>.context_length`) from the header, or None when the file has none or
    is not a readable GGUF (loading then says why). Token lists are skipped: this runs as the user types a path."""
    try:
        return _context_length(read_gguf(path, max_array=0))
    except (GGUFError, OSError):
        return None


def format_params(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def describe(report: GGUFReport) -> list[str]:
    """Human-readable lines for the CLI."""
    lines = [
        f"file:          {report.path}",
        f"size:          {format_bytes(report.file_size)}  (GGUF v{report.gguf_version})",
        f"architecture:  {report.architecture or '?'}   name: {report.name or '?'}",
        f"parameters:    {format_params(report.parameter_count)} ({report.parameter_count:,})",
        f"context:       {report.context_length or '?'}",
        f"chat template: {'yes' if report.chat_template else 'no'}",
        f"file type:     {report.file_type} ({report.file_type_name or 'not set'})   format: {report.format}",
        f"tokenizer:     {report.tokenizer.model or '?'}  vocab {report.tokenizer.vocab_size or '?'}"
        f"  bos {report.tokenizer.bos_id}  eos {report.tokenizer.eos_id}",
    ]
    if report.mtp_layers:
        lines.append(f"mtp layers:    {report.mtp_layers} (drafts for itself: generate --mtp, speculative.source mtp)")
    if report.split_count > 1:
        lines.append(
            f"split:         {report.split_count} shards"
            + (f", missing: {', '.join(report.missing_shards)}" if report.missing_shards else "")
        )
    lines.append("quant mix:")
    total = sum(q.nbytes for q in report.quant_mix) or 1
    for q in report.quant_mix:
        tag = {MAINLINE: "", FORK: f"  [{q.fork} fork]", UNKNOWN: "  [not in this runtime]"}[q.origin]
        lines.append(
            f"  {q.name:<22} id {q.type_id:>3}  {q.tensors:>4} tensors  {format_params(q.elements):>7} weights"
            f"  {format_bytes(q.nbytes):>10} ({100 * q.nbytes / total:4.1f}%){tag}"
        )
    return lines
