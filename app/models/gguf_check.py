"""Before a model loads: its GGUF header parses and every tensor's data lies inside the file (no truncated copy)."""

from __future__ import annotations

from pathlib import Path

from app.models.gguf_reader import GGUFError, GGUFFile, read_gguf
from app.models.inspection import format_bytes, shard_names


def _type_sizes() -> dict[int, tuple[int, int]]:
    """ggml type id -> (elements per block, bytes per block) for the mainline types gguf-py knows."""
    from gguf.constants import GGML_QUANT_SIZES

    return {int(t): (int(b), int(s)) for t, (b, s) in GGML_QUANT_SIZES.items()}


def data_end(g: GGUFFile, sizes: dict[int, tuple[int, int]]) -> tuple[int, str]:
    """The file size the tensor table needs (absolute offset) and the tensor that ends last there.

    A fork's type id with no known block size still needs its offset to lie inside the file.
    """
    need, last = g.data_offset, ""
    for t in g.tensors:
        end = g.data_offset + t.offset
        if t.type_id in sizes:
            block, nbytes = sizes[t.type_id]
            end += (t.n_elements + block - 1) // block * nbytes
        if end > need:
            need, last = end, t.name
    return need, last


def check_complete(path: str | Path) -> None:
    """Raise GGUFError with a user-facing sentence when `path` (or one of its shards) is missing or truncated."""
    first = Path(path)
    sizes = _type_sizes()
    for name in shard_names(first.name):
        shard = first.with_name(name)
        if not shard.is_file():
            raise GGUFError(f"{first.name}: shard {name} is missing next to it; download the model again")
        try:
            g = read_gguf(shard, max_array=0)
        except GGUFError as e:
            raise GGUFError(f"{shard.name} is damaged or truncated ({e}); download it again") from None
        need, last = data_end(g, sizes)
        if need > g.file_size:
            raise GGUFError(
                f"{shard.name} is truncated: its tensors need {format_bytes(need)} but the file has "
                f"{format_bytes(g.file_size)} ({need - g.file_size} bytes missing, from tensor {last!r} on); "
                "download it again"
            )
