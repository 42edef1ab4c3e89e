"""The bundled llama.cpp runtime: version, system info, and its backends/devices from ggml's backend registry."""

from __future__ import annotations

import ctypes
from dataclasses import asdict, dataclass, field
from typing import Any

from app.models.quant_types import runtime_type_names

# enum ggml_backend_dev_type in ggml-backend.h (llama-cpp-python 0.3.36's vendored llama.cpp).
DEVICE_TYPES = {0: "CPU", 1: "GPU", 2: "IGPU", 3: "ACCEL", 4: "META"}


@dataclass(frozen=True)
class Device:
    """One ggml backend device as the registry reports it."""

    name: str
    description: str
    type: str
    backend: str
    memory_free: int
    memory_total: int


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


def _bind(lib: ctypes.CDLL, name: str, restype: Any, argtypes: list[Any]) -> Any:
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


def list_devices() -> list[Device]:
    """Devices in ggml's backend registry, through libggml loaded by llama_cpp (the bindings don't wrap these)."""
    import llama_cpp  # noqa: F401 - loading libllama initialises the backends it was built with
    from llama_cpp._ggml import libggml

    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    dev_count = _bind(libggml, "ggml_backend_dev_count", sz, [])
    dev_get = _bind(libggml, "ggml_backend_dev_get", vp, [sz])
    dev_name = _bind(libggml, "ggml_backend_dev_name", ctypes.c_char_p, [vp])
    dev_desc = _bind(libggml, "ggml_backend_dev_description", ctypes.c_char_p, [vp])
    dev_type = _bind(libggml, "ggml_backend_dev_type", ctypes.c_int, [vp])
    dev_memory = _bind(libggml, "ggml_backend_dev_memory", None, [vp, ctypes.POINTER(sz), ctypes.POINTER(sz)])
    dev_reg = _bind(libggml, "ggml_backend_dev_backend_reg", vp, [vp])
    reg_name = _bind(libggml, "ggml_backend_reg_name", ctypes.c_char_p, [vp])
    devices = []
    for i in range(dev_count()):
        dev = dev_get(i)
        if not dev:
            continue
        free, total = sz(0), sz(0)
        dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        reg = dev_reg(dev)
        devices.append(
            Device(
                name=(dev_name(dev) or b"").decode(errors="replace"),
                description=(dev_desc(dev) or b"").decode(errors="replace"),
                type=DEVICE_TYPES.get(dev_type(dev), f"type {dev_type(dev)}"),
                backend=(reg_name(reg) or b"").decode(errors="replace") if reg else "",
                memory_free=free.value,
                memory_total=total.value,
            )
        )
    return devices


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
