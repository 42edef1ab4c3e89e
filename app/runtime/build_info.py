"""What the installed llama-cpp-python is and offers: version, build summary, GPU offload, enum constants, quantizer."""

from __future__ import annotations

import os
from pathlib import Path

# What importing or calling into a broken or missing llama-cpp-python install raises.
UNAVAILABLE = (ImportError, AttributeError, OSError, RuntimeError)


def bindings_version() -> str:
    """The llama-cpp-python version ("?" when it does not say); raises one of UNAVAILABLE without a usable install."""
    import llama_cpp

    return str(getattr(llama_cpp, "__version__", "?"))


def system_info() -> str:
    """llama.cpp's own one-line summary of the CPU features and backends it was built with."""
    import llama_cpp

    return str(llama_cpp.llama_print_system_info().decode(errors="replace").strip())


def supports_gpu_offload() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


def constants(prefix: str) -> dict[str, int]:
    """The bindings' integer constants whose names start with `prefix` (e.g. "GGML_TYPE_"), prefix removed."""
    import llama_cpp

    out: dict[str, int] = {}
    for attr in dir(llama_cpp):
        value = getattr(llama_cpp, attr)
        if attr.startswith(prefix) and isinstance(value, int) and not isinstance(value, bool):
            out[attr.removeprefix(prefix)] = value
    return out


def quantize(src: Path, dest: Path, ftype: str) -> int:
    """llama.cpp's quantizer: `src` re-quantised to LLAMA_FTYPE_MOSTLY_<ftype> at `dest`; its return code (0 = ok)."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype.upper()}")
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 2
    return int(llama_cpp.llama_model_quantize(str(src).encode(), str(dest).encode(), params))
