"""The bundled llama.cpp runtime: version, system info, and its backends/devices from ggml's backend registry."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from app.models.quant_types import runtime_type_names
from app.runtime import build_info
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
        version = build_info.bindings_version()
    except build_info.UNAVAILABLE as e:
        return RuntimeInfo("llama-cpp-python", "not installed", "", error=f"{type(e).__name__}: {e}")
    info = RuntimeInfo(
        name="llama-cpp-python (bundled llama.cpp)",
        version=version,
        system_info=build_info.system_info(),
        loadable_types=runtime_type_names(),
    )
    try:
        info.devices = list_devices()
    except (AttributeError, OSError, ImportError) as e:
        info.error = f"backend registry not available: {e}"
    return info
