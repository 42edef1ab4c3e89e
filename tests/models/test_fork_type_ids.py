"""The ROCmFPx type-id tables name what the fork the project builds writes: checked against that fork's own headers."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from app.models.quant_types import ROCMFPX_COMMIT, ROCMFPX_FILE_TYPES, ROCMFPX_TENSOR_TYPES

ROOT = Path(__file__).resolve().parents[2]
ENUM = re.compile(r"^\s*(GGML_TYPE_\w+|LLAMA_FTYPE_MOSTLY_\w+)\s*=\s*(\d+)", re.M)


def _headers(source: Path) -> str:
    """ggml.h and llama.h of the fork's source (a checkout or a tarball)."""
    names = ("ggml/include/ggml.h", "include/llama.h")
    if source.is_dir():
        return "".join((source / n).read_text() for n in names)
    with tarfile.open(source) as tar:
        members = [m for m in tar.getmembers() if m.name.split("/", 1)[-1] in names]
        return "".join(tar.extractfile(m).read().decode() for m in members)  # type: ignore[union-attr]


def _fork_file_type_name(constant: str) -> str:
    """LLAMA_FTYPE_MOSTLY_Q4_0_ROCMFP4_LEAN -> ROCmFP4_LEAN; LLAMA_FTYPE_MOSTLY_Q6_0_ROCMFPX_AGENT -> ROCmFPx_Q6_0_AGENT."""
    rest = constant.removeprefix("LLAMA_FTYPE_MOSTLY_")
    if m := re.fullmatch(r"Q4_0_ROCMFP4(_\w+)?", rest):
        return "ROCmFP4" + (m.group(1) or "")
    m = re.fullmatch(r"(Q\d_0)_ROCMFPX(_\w+)?", rest)
    assert m, constant
    return f"ROCmFPx_{m.group(1)}{m.group(2) or ''}"


def test_the_tables_are_the_built_forks_ids_and_names(fork_source: Path) -> None:
    text = _headers(fork_source)
    ids = {name: int(value) for name, value in ENUM.findall(text)}
    tensors = {v: k.removeprefix("GGML_TYPE_") for k, v in ids.items() if k.startswith("GGML_TYPE_") and v >= 100}
    tensors.pop(ids["GGML_TYPE_COUNT"], None)
    files = {v: _fork_file_type_name(k) for k, v in ids.items() if k.startswith("LLAMA_FTYPE_MOSTLY_") and v >= 100}
    assert dict(sorted(tensors.items())) == ROCMFPX_TENSOR_TYPES
    assert dict(sorted(files.items())) == ROCMFPX_FILE_TYPES
    # The script builds the same commit the tables follow.
    assert f"FORK_COMMIT={ROCMFPX_COMMIT}" in (ROOT / "scripts" / "build-fork-server.sh").read_text()
