"""The bundled llama.cpp runtime: version, system info, and its backends/devices from ggml's backend registry."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from app.models.quant_types import runtime_type_names
from app.runtime.device import Device, list_devices


@dataclass
class RuntimeInfo:
    """What the bundled runtime is and what it can run."""

    name: str
    version: str
    system_info: str
    devices: list[Device] = field(default_factory=list)
    loadable_types: dict[int, str] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def runtime_info() -> RuntimeInfo:
    """Describe the bundled llama-cpp-python; never raises (a broken install is reported in `error`)."""
    try:
        import llama_cpp
    except (ImportError, OSError, RuntimeError) as e:
        return RuntimeInfo("llama-cpp-python", "not installed", "", error=f"{type(e).__name__}: {e}")
    info = RuntimeInfo(
        name="llama-cpp-python (bundled llama.cpp)",
        version=str(getattr(llama_cpp, "__version__", "?")),
        system_info=llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        loadable_types=runtime_type_names(),
    )
    try:
        info.devices = list_devices()
    except (AttributeError, OSError, ImportError) as e:
        info.error = f"backend registry not available: {e}"
    return info
