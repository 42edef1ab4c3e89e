"""Names for ggml tensor types and GGUF file types: the active runtime's ids, known fork ids, and unknown ones."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from app.runtime import build_info

# Where a type id comes from decides whether the bundled runtime can load it.
MAINLINE = "mainline"
FORK = "fork"
UNKNOWN = "unknown"

ROCMFPX_FORK = "ROCmFPx"
ROCMFPX_COMMIT = "c14872f8407f5b0642f3c395439b929021df753a"  # the commit scripts/build-fork-server.sh builds
ROCMFPX_SOURCE = f"ciru-ai/ROCmFPX ggml/include/ggml.h + include/llama.h @ {ROCMFPX_COMMIT[:7]}"

# general.file_type values (llama_ftype) of the ciru-ai/ROCmFPX fork at ROCMFPX_COMMIT, named after its
# LLAMA_FTYPE_MOSTLY_* constants (tests/models/test_fork_type_ids.py compares them with the headers). Its numbering
# moved between commits (a later one has 119 as Q7_0 and 122 as Q2_0), which is why tensor ids, not this name, decide
# what a file contains.
ROCMFPX_FILE_TYPES: dict[int, str] = {
    100: "ROCmFP4",
    101: "ROCmFP4_LEAN",
    102: "ROCmFP4_COHERENT",
    103: "ROCmFP4_FAST",
    104: "ROCmFP4_FAST_COHERENT",
    105: "ROCmFP4_STRIX",
    106: "ROCmFP4_STRIX_LEAN",
    110: "ROCmFPx_Q6_0",
    111: "ROCmFPx_Q8_0",
    112: "ROCmFPx_Q3_0",
    113: "ROCmFPx_Q3_0_AGENT",
    114: "ROCmFPx_Q6_0_AGENT",
    115: "ROCmFPx_Q8_0_AGENT",
    116: "ROCmFPx_Q6_0_LEAN",
    117: "ROCmFPx_Q6_0_AGENT_LEAN",
    119: "ROCmFPx_Q2_0",
}

# ggml_type ids of the same fork at the same commit. 105/106 are KV-cache types and should never appear in a model
# file.
ROCMFPX_TENSOR_TYPES: dict[int, str] = {
    100: "Q4_0_ROCMFP4",
    101: "Q4_0_ROCMFP4_FAST",
    102: "Q6_0_ROCMFPX",
    103: "Q8_0_ROCMFPX",
    104: "Q3_0_ROCMFPX",
    105: "TURBO3_0",
    106: "TURBO4_0",
    107: "Q2_0_ROCMFPX",
}


@dataclass(frozen=True)
class ForkTypeTable:
    """Tensor type ids of one fork, valid only in files whose general.file_type is one of that fork's recipes."""

    fork: str
    source: str
    file_types: frozenset[int]
    tensor_types: dict[int, str]


# Other ROCmFP4 forks reused ids 47/48 and 50/51 with different layouts; their file types are not documented
# anywhere we could check, so they have no entry and are reported as "unknown fork type N" instead of guessed.
FORK_TABLES: tuple[ForkTypeTable, ...] = (
    ForkTypeTable(ROCMFPX_FORK, ROCMFPX_SOURCE, frozenset(ROCMFPX_FILE_TYPES), ROCMFPX_TENSOR_TYPES),
)


@dataclass(frozen=True)
class TypeName:
    """A tensor type id with the name we can honestly give it and where that name comes from."""

    type_id: int
    name: str
    origin: str  # MAINLINE, FORK or UNKNOWN
    fork: str | None = None

    @property
    def loadable(self) -> bool:
        return self.origin == MAINLINE


@lru_cache(maxsize=1)
def runtime_type_names() -> dict[int, str]:
    """Tensor type ids the bundled llama.cpp can load, named from gguf's enum and llama_cpp's GGML_TYPE_* constants.

    Ids at or above the runtime's GGML_TYPE_COUNT are dropped even if a newer `gguf` package names them, because
    the compiled library would reject them.
    """
    names: dict[int, str] = {}
    count: int | None = None
    try:
        ggml_types = build_info.constants("GGML_TYPE_")
        count = ggml_types.pop("COUNT")
        for name, value in ggml_types.items():
            names.setdefault(value, name)
    except (*build_info.UNAVAILABLE, KeyError):
        pass
    try:
        from gguf import GGMLQuantizationType

        for member in GGMLQuantizationType:
            # gguf's names are the canonical spelling; llama_cpp's Python constants omit some (BF16, TQ1_0, ...).
            names[int(member)] = member.name
    except ImportError:
        pass
    if count is not None:
        names = {k: v for k, v in names.items() if k < count}
    return dict(sorted(names.items()))


@lru_cache(maxsize=1)
def mainline_file_type_names() -> dict[int, str]:
    """general.file_type values known to mainline (llama_ftype), as short names like 'Q4_K_M' or 'IQ3_S'."""
    names: dict[int, str] = {}
    try:
        for name, value in build_info.constants("LLAMA_FTYPE_").items():
            names.setdefault(value, _short_ftype(name))
    except build_info.UNAVAILABLE:
        pass
    try:
        from gguf import LlamaFileType

        for member in LlamaFileType:
            names[int(member)] = _short_ftype(member.name)
    except ImportError:
        pass
    names.pop(1024, None)  # GUESSED is never written to a file
    return dict(sorted(names.items()))


def _short_ftype(name: str) -> str:
    for prefix in ("MOSTLY_", "ALL_"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def fork_table_for(file_type: int | None) -> ForkTypeTable | None:
    """The fork whose recipes include this general.file_type, if any."""
    if file_type is None:
        return None
    for table in FORK_TABLES:
        if file_type in table.file_types:
            return table
    return None


def name_tensor_type(type_id: int, file_type: int | None) -> TypeName:
    """Name a raw tensor type id in the context of the file's general.file_type; never guesses across forks."""
    # The fork's table wins inside its own files: should mainline ever reuse an id the fork took, a file written
    # by the fork still means the fork's layout.
    table = fork_table_for(file_type)
    if table is not None and type_id in table.tensor_types:
        return TypeName(type_id, table.tensor_types[type_id], FORK, table.fork)
    mainline = runtime_type_names()
    if type_id in mainline:
        return TypeName(type_id, mainline[type_id], MAINLINE)
    return TypeName(type_id, f"unknown fork type {type_id}", UNKNOWN)


def name_file_type(file_type: int | None) -> tuple[str | None, str]:
    """(short name, origin) for a general.file_type value; (None, UNKNOWN) when absent."""
    if file_type is None:
        return None, UNKNOWN
    mainline = mainline_file_type_names()
    if file_type in mainline:
        return mainline[file_type], MAINLINE
    table = fork_table_for(file_type)
    if table is not None:
        return ROCMFPX_FILE_TYPES.get(file_type, f"{table.fork} file type {file_type}"), FORK
    return f"unknown file type {file_type}", UNKNOWN
