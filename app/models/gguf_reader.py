"""Minimal GGUF v2/v3 reader: header, typed metadata and tensor infos, with raw tensor type ids kept as ints."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# GGUF metadata value types (gguf spec); unlike tensor types these never change between forks.
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = 0, 1, 2, 3, 4, 5, 6, 7
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = 8, 9, 10, 11, 12
_SCALAR_FORMATS: dict[int, str] = {
    T_UINT8: "B",
    T_INT8: "b",
    T_UINT16: "H",
    T_INT16: "h",
    T_UINT32: "I",
    T_INT32: "i",
    T_FLOAT32: "f",
    T_BOOL: "?",
    T_UINT64: "Q",
    T_INT64: "q",
    T_FLOAT64: "d",
}
# No sane file has more dims or longer keys than this; beyond it the file is corrupt, not exotic.
_MAX_DIMS = 8
_MAX_STRING = 1 << 30


class GGUFError(ValueError):
    """The file is not a GGUF file we can read (bad magic, unsupported version, truncated or corrupt)."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's header entry; `type_id` is the raw ggml type id, never interpreted by the reader."""

    name: str
    dims: tuple[int, ...]
    type_id: int
    offset: int  # relative to the start of the data section

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


@dataclass
class GGUFFile:
    """Everything in a GGUF header; `nbytes` per tensor is derived from offsets so it works for unknown types."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    data_offset: int  # absolute file offset of the tensor data section
    file_size: int
    # Arrays longer than `max_array` are not kept; only their length is (see `array_lengths`).
    array_lengths: dict[str, int] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def tensor_nbytes(self) -> dict[str, int]:
        """Bytes each tensor occupies on disk, from the gap to the next offset (the last one runs to EOF)."""
        ordered = sorted(self.tensors, key=lambda t: t.offset)
        end = self.file_size - self.data_offset
        sizes: dict[str, int] = {}
        for i, t in enumerate(ordered):
            nxt = ordered[i + 1].offset if i + 1 < len(ordered) else end
            sizes[t.name] = max(0, nxt - t.offset)
        return sizes


class _Reader:
    """Sequential little-endian reads with bounds checks, so corrupt lengths fail fast instead of allocating GBs."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self.f = f
        self.size = size
        self.pos = 0

    def read(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.size:
            raise GGUFError(f"truncated file: wanted {n} bytes at offset {self.pos}, file has {self.size}")
        b = self.f.read(n)
        if len(b) != n:
            raise GGUFError(f"truncated file at offset {self.pos}")
        self.pos += n
        return b

    def unpack(self, fmt: str) -> Any:
        s = struct.Struct("<" + fmt)
        return s.unpack(self.read(s.size))[0]

    def string(self) -> str:
        n = self.unpack("Q")
        if n > _MAX_STRING:
            raise GGUFError(f"string length {n} at offset {self.pos} is not plausible")
        return self.read(n).decode("utf-8", errors="replace")

    def value(self, vtype: int, key: str, max_array: int | None, lengths: dict[str, int]) -> Any:
        if vtype in _SCALAR_FORMATS:
            return self.unpack(_SCALAR_FORMATS[vtype])
        if vtype == T_STRING:
            return self.string()
        if vtype == T_ARRAY:
            etype = self.unpack("I")
            count = self.unpack("Q")
            if count > self.size:  # every element takes at least one byte
                raise GGUFError(f"{key}: array length {count} exceeds the file size")
            lengths[key] = count
            keep = max_array is None or count <= max_array
            if etype in _SCALAR_FORMATS:
                fmt = _SCALAR_FORMATS[etype]
                raw = self.read(struct.calcsize("<" + fmt) * count)
                return list(struct.unpack(f"<{count}{fmt}", raw)) if keep else None
            if etype == T_STRING:
                items = [self.string() for _ in range(count)]
                return items if keep else None
            if etype == T_ARRAY:
                nested = [self.value(T_ARRAY, key, max_array, {}) for _ in range(count)]
                return nested if keep else None
            raise GGUFError(f"{key}: unknown array element type {etype}")
        raise GGUFError(f"{key}: unknown metadata value type {vtype}")


def read_gguf(path: str | Path, max_array: int | None = None) -> GGUFFile:
    """Parse a GGUF file's header without touching tensor data; unknown tensor type ids are kept, never rejected.

    `max_array` drops the contents of longer arrays (token lists, merges) when only their length matters.
    """
    p = Path(path)
    size = p.stat().st_size
    with open(p, "rb") as f:
        r = _Reader(f, size)
        magic = r.read(4)
        if magic != GGUF_MAGIC:
            raise GGUFError(f"{p.name}: not a GGUF file (magic {magic!r})")
        version = r.unpack("I")
        if version in (2, 3):
            pass
        elif version == 1:
            raise GGUFError(f"{p.name}: GGUF v1 (32-bit counts) is obsolete and not supported")
        elif version & 0xFFFF == 0:
            raise GGUFError(f"{p.name}: big-endian GGUF (version {version:#x}) is not supported")
        else:
            raise GGUFError(f"{p.name}: unsupported GGUF version {version}")
        n_tensors = r.unpack("Q")
        n_kv = r.unpack("Q")
        if n_tensors > size or n_kv > size:
            raise GGUFError(f"{p.name}: implausible counts (tensors={n_tensors}, kv={n_kv})")
        metadata: dict[str, Any] = {}
        lengths: dict[str, int] = {}
        for _ in range(n_kv):
            key = r.string()
            vtype = r.unpack("I")
            metadata[key] = r.value(vtype, key, max_array, lengths)
        tensors: list[TensorInfo] = []
        for _ in range(n_tensors):
            name = r.string()
            n_dims = r.unpack("I")
            if n_dims > _MAX_DIMS:
                raise GGUFError(f"{p.name}: tensor {name!r} has {n_dims} dims")
            dims = tuple(r.unpack("Q") for _ in range(n_dims))
            type_id = r.unpack("I")
            offset = r.unpack("Q")
            tensors.append(TensorInfo(name=name, dims=dims, type_id=type_id, offset=offset))
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0:
            alignment = DEFAULT_ALIGNMENT
        data_offset = (r.pos + alignment - 1) // alignment * alignment
    return GGUFFile(
        path=p,
        version=version,
        metadata=metadata,
        tensors=tensors,
        data_offset=data_offset,
        file_size=size,
        array_lengths=lengths,
    )
