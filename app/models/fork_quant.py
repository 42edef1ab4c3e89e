"""ROCmFPx builds of the packaged models, written by the fork's own llama-quantize and cached by sha256."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from app.models.download import read_marker, sha256_file, write_marker
from app.models.packaged import ALL, ensure_model, part_path

ROCMFP4 = "Q4_0_ROCMFP4"  # the fork's basic ROCmFP4 recipe: tensor type id 100, general.file_type 100


def ensure_fork_quantized(key: str, quantize: str | Path, ftype: str = ROCMFP4, timeout_s: float = 900.0) -> Path:
    """A packaged model re-quantized to a fork type (e.g. Q4_0_ROCMFP4) by the fork's `llama-quantize`.

    Cached next to the packaged models under a name keyed by the source's published sha256 and the quantizer's own
    sha256, so another source or another fork build writes another file; a marker records the output's sha256,
    size and mtime after a complete run, so a truncated or replaced file is made again.
    """
    src = ensure_model(key)
    tool = Path(quantize)
    if not (tool.is_file() and os.access(tool, os.X_OK)):
        raise FileNotFoundError(f"the fork's llama-quantize is not an executable file: {tool}")
    tool_sha = sha256_file(tool)
    dest = src.with_name(f"{src.stem.rsplit('.', 1)[0]}.{ftype}.{ALL[key].sha256[:8]}-{tool_sha[:8]}.gguf")
    if read_marker(dest) is not None:  # written after a complete run, and the file is unchanged since
        return dest
    tmp = part_path(dest)
    cmd = [str(tool), "--allow-requantize", str(src), str(tmp), ftype, str(os.cpu_count() or 2)]
    out = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False)
    if out.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-8:])
        raise RuntimeError(f"{tool.name} {ftype} failed (exit {out.returncode}) for {key}:\n{tail}")
    os.replace(tmp, dest)
    write_marker(dest, sha256_file(dest))
    return dest
