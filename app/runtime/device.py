"""Which device runs the model: GPU detection from ggml's backend registry, Strix Halo recognition, offload defaults.

`list_devices()` reads the registry through libggml; the rest only interprets what it returns, so the pure parts
(`classify`, `is_strix_halo`, `default_gpu_layers(devices)`, `describe_active(..., devices)`) work on plain
`Device` values and are tested without a GPU.

Notes on what ggml reports (llama-cpp-python 0.3.36's vendored llama.cpp):
- the Vulkan backend names its devices "Vulkan0", "Vulkan1", ... and the description is the driver's device name,
  e.g. "AMD Radeon 8060S Graphics (RADV GFX1151)" (Mesa RADV), "AMD Radeon(TM) 8060S Graphics" (AMDVLK / Windows),
  "NVIDIA H200", or "llvmpipe (LLVM 15.0.6, 256 bits)" (Mesa's lavapipe, a CPU implementation of Vulkan);
- its type is IGPU for a unified-memory (UMA) device and GPU for a discrete one;
- ggml-vulkan skips CPU-type Vulkan devices (lavapipe) unless GGML_VK_VISIBLE_DEVICES names them.
"""

from __future__ import annotations

import contextlib
import ctypes
import platform
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Flash attention settings, as llama.cpp's -fa: "auto" resolves the same way for the same backend, device and model.
FLASH_ATTN_MODES = ("auto", "on", "off")

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


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


ALL_LAYERS = -1  # llama.cpp: a negative n_gpu_layers offloads every layer (same as 999)

# Strix Halo (Ryzen AI Max / Max+ 3xx): Radeon 8060S (40 CUs) and 8050S (32 CUs), RDNA 3.5, gfx1151.
_STRIX_HALO = re.compile(r"radeon[^0-9]*80[56]0s|gfx\s*1151|strix[\s_-]*halo", re.IGNORECASE)
# Software rasterisers that expose a Vulkan device: offloading to them is slower than ggml's own CPU backend.
_SOFTWARE = re.compile(r"llvmpipe|lavapipe|swiftshader|softpipe", re.IGNORECASE)


def is_strix_halo(description: str) -> bool:
    """True for a Strix Halo iGPU description: "Radeon 8060S"/"8050S" (any vendor decoration) or gfx1151."""
    return bool(_STRIX_HALO.search(description or ""))


def is_software(dev: Device) -> bool:
    return bool(_SOFTWARE.search(f"{dev.name} {dev.description}"))


def classify(dev: Device) -> str:
    """ "cpu", "software" (lavapipe & co.), "unified" (an iGPU/APU sharing system memory) or "discrete"."""
    if dev.type == "CPU":
        return "cpu"
    if is_software(dev):
        return "software"
    if dev.type == "IGPU" or is_strix_halo(dev.description):
        return "unified"
    if dev.type in ("GPU", "ACCEL"):
        return "discrete"
    return "cpu"


def short_name(description: str) -> str:
    """A status-bar name: "AMD Radeon 8060S Graphics (RADV GFX1151)" -> "Radeon 8060S"; others lose vendor noise."""
    d = description or ""
    m = re.search(r"radeon[^0-9a-z]*(?:\(tm\))?\s*(80[56]0s)", d, re.IGNORECASE)
    if m:
        return f"Radeon {m.group(1).upper()}"
    if re.search(r"gfx\s*1151", d, re.IGNORECASE):
        return "Radeon (Strix Halo, gfx1151)"
    d = re.sub(r"\((?:tm|r)\)", "", d, flags=re.IGNORECASE)
    d = re.sub(r"\s*\((?:RADV|LLVM)[^)]*\)", "", d)  # driver decoration
    d = re.sub(r"^\s*AMD\s+", "", d)
    d = re.sub(r"\s+Graphics\s*$", "", d)
    return re.sub(r"\s+", " ", d).strip() or description


@dataclass(frozen=True)
class Accelerator:
    """The device that would run offloaded layers."""

    backend: str  # registry name, e.g. "Vulkan"
    name: str  # "Vulkan0"
    description: str  # the driver's device name
    kind: str  # "unified", "discrete" or "software"
    strix_halo: bool
    memory_total: int

    @property
    def label(self) -> str:
        return short_name(self.description)


def accelerators(devices: Sequence[Device] | None = None) -> list[Accelerator]:
    """Non-CPU devices in registry order (ggml's default offload order), software devices last."""
    devs = list_devices() if devices is None else list(devices)
    out = [
        Accelerator(
            d.backend or d.name.rstrip("0123456789"),
            d.name,
            d.description,
            classify(d),
            is_strix_halo(d.description),
            d.memory_total,
        )
        for d in devs
        if classify(d) != "cpu"
    ]
    return sorted(out, key=lambda a: a.kind == "software")


def best_accelerator(devices: Sequence[Device] | None = None, allow_software: bool = False) -> Accelerator | None:
    for a in accelerators(devices):
        if a.kind != "software" or allow_software:
            return a
    return None


def default_gpu_layers(devices: Sequence[Device] | None = None) -> int:
    """Offload rule: every layer (-1) on a unified-memory APU (Strix Halo: the iGPU reads the same RAM, so there is
    nothing to save by keeping layers on the CPU) and on a discrete GPU (llama.cpp keeps what does not fit on the
    CPU only if asked; -1 is what users of one GPU want); 0 when only the CPU or a software Vulkan device is there."""
    try:
        acc = best_accelerator(devices)
    except (ImportError, OSError, AttributeError):
        return 0
    return ALL_LAYERS if acc is not None else 0


def resolve_flash_attn(mode: str, n_gpu_layers: int, devices: Sequence[Device] | None = None) -> str:
    """The flash-attention setting to give llama.cpp: `mode` as asked, except "auto" on a software Vulkan device.

    ggml-vulkan's flash-attention path crashed Mesa's lavapipe (LLVM 15, Debian bookworm) in 7 of 10 runs of a
    speculative rollback sequence (SIGSEGV or abort in llama_decode); with it off, 6 of 6 ran. On the H200's NVIDIA
    Vulkan driver the same sequence ran 12 of 12 with it on. So "auto" means off only where layers go to a software
    device. An explicit "on" is honoured."""
    if mode != "auto" or n_gpu_layers == 0:
        return mode
    try:
        devs = list_devices() if devices is None else list(devices)
    except (ImportError, OSError, AttributeError):
        return mode
    acc = best_accelerator(devs, allow_software=True)
    return "off" if acc is not None and acc.kind == "software" else mode


def describe_active(
    n_gpu_layers: int | None = None,
    devices: Sequence[Device] | None = None,
    backends: Sequence[str] | None = None,
) -> str:
    """One line for the GUI status bar: "Vulkan · Radeon 8060S", "Vulkan · NVIDIA H200", "CPU · AMD Ryzen ...".

    n_gpu_layers None means `default_gpu_layers()`. Software devices are named only when nothing else is there and
    layers are offloaded (the lavapipe test set-up): "Vulkan · llvmpipe (software)". On the CPU the line also says
    what the wheel was built with (`build_note`), from `backends` or, when neither they nor `devices` are given,
    from ggml's registry: a CPU line alone can't tell a CPU-only wheel from a Vulkan one that found no GPU."""
    try:
        devs = list_devices() if devices is None else list(devices)
    except (ImportError, OSError, AttributeError):
        devs = []
    if backends is None and devices is None:
        with contextlib.suppress(ImportError, OSError, AttributeError):
            backends = backend_names()
    if n_gpu_layers is None:
        n_gpu_layers = default_gpu_layers(devs)
    if n_gpu_layers != 0:
        acc = best_accelerator(devs, allow_software=True)
        if acc is not None:
            label = acc.label + (" (software)" if acc.kind == "software" else "")
            partial = "" if n_gpu_layers < 0 or n_gpu_layers >= 999 else f" ({n_gpu_layers} layers)"
            return f"{acc.backend} · {label}{partial}"
    return f"CPU · {cpu_name()}{build_note(backends)}"


def build_note(backends: Sequence[str] | None) -> str:
    """ " (Vulkan build)" or " (CPU-only build)": whether the wheel registered a Vulkan backend; "" when unknown."""
    if backends is None:
        return ""
    return " (Vulkan build)" if "Vulkan" in backends else " (CPU-only build)"


def backend_names() -> list[str]:
    """Backends compiled into (or loaded by) the bundled libggml, e.g. ["Vulkan", "CPU"], even with no device."""
    import llama_cpp  # noqa: F401 - loads libggml and registers its backends
    from llama_cpp._ggml import libggml

    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    reg_count = _bind(libggml, "ggml_backend_reg_count", sz, [])
    reg_get = _bind(libggml, "ggml_backend_reg_get", vp, [sz])
    reg_name = _bind(libggml, "ggml_backend_reg_name", ctypes.c_char_p, [vp])
    names = []
    for i in range(reg_count()):
        reg = reg_get(i)
        if reg:
            names.append((reg_name(reg) or b"").decode(errors="replace"))
    return names


def has_vulkan_backend() -> bool:
    """True when the installed llama-cpp-python was built with GGML_VULKAN (devices may still be absent)."""
    try:
        return "Vulkan" in backend_names()
    except (ImportError, OSError, AttributeError):
        return False
