#!/usr/bin/env python3
"""Choose llama.cpp's build backend (cpu or vulkan) from DYNADRAFT_LLAMA_BACKEND and the Vulkan devices found here."""

# It runs with the system Python before .venv exists (scripts/llama-build-flags.sh calls it), so: stdlib only, and
# nothing newer than Python 3.8 outside annotations.
#
# Usage: scripts/choose_backend.py [--name-only] [--listing FILE] [--library LIB]
#   prints "backend: vulkan (<device name>)" or "backend: cpu (<why>)"; --name-only prints just the backend.
#   DYNADRAFT_LLAMA_BACKEND: auto (default), cpu or vulkan; anything else exits 2 with one line.
#   --listing FILE (or DYNADRAFT_VULKAN_LISTING=FILE): a JSON device listing used in place of the probe, for tests:
#     [{"name": "...", "type": "integrated-gpu"}, ...] or {"error": "..."}; types as in VK_TYPES below.
#   --library LIB (or DYNADRAFT_VULKAN_LIBRARY): the Vulkan loader to probe, default libvulkan.so.1.
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
from typing import Any

LOADER = "libvulkan.so.1"
CHOICES = ("auto", "cpu", "vulkan")
# enum VkPhysicalDeviceType, in order.
VK_TYPES = ("other", "integrated-gpu", "discrete-gpu", "virtual-gpu", "cpu")
# The types that count as a usable GPU. ggml-vulkan takes discrete and integrated GPUs, else the first device that is
# not of type "cpu"; it skips "cpu" devices (Mesa's llvmpipe, i.e. lavapipe) unless GGML_VK_VISIBLE_DEVICES names them.
GPU_TYPES = ("integrated-gpu", "discrete-gpu", "virtual-gpu")
VK_ERRORS = {
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER: the loader found no usable driver",
}
# A driver can hang or crash inside vkCreateInstance; the CLI probes in a child process so that costs a reason only.
PROBE_TIMEOUT_S = 30


class _InstanceCreateInfo(ctypes.Structure):
    """VkInstanceCreateInfo with no application info, layers or extensions."""

    _fields_ = [
        ("sType", ctypes.c_uint32),  # VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.c_void_p),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    ]


def _bind(lib: ctypes.CDLL, name: str, restype: Any, argtypes: list[Any]) -> Any:
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = restype, argtypes
    return fn


def _load(library: str) -> ctypes.CDLL | str:
    try:
        return ctypes.CDLL(library)
    except OSError as e:
        if "No such file" in str(e) or "cannot open shared object file" in str(e):
            return f"no Vulkan loader ({library} not found)"
        return f"Vulkan loader failed: {e}"


def _too_old(vk: ctypes.CDLL) -> str | None:
    """ggml-vulkan stops with "Vulkan 1.2 required" below that instance version (a 1.0 loader lacks the call)."""
    if not hasattr(vk, "vkEnumerateInstanceVersion"):
        return "Vulkan loader too old: it has no vkEnumerateInstanceVersion (Vulkan 1.0); ggml-vulkan needs 1.2"
    version = ctypes.c_uint32(0)
    _bind(vk, "vkEnumerateInstanceVersion", ctypes.c_int32, [ctypes.POINTER(ctypes.c_uint32)])(ctypes.byref(version))
    major, minor = version.value >> 22 & 0x7F, version.value >> 12 & 0x3FF
    return None if (major, minor) >= (1, 2) else f"Vulkan loader too old: {major}.{minor}; ggml-vulkan needs 1.2"


def _devices(vk: ctypes.CDLL, instance: ctypes.c_void_p) -> list[tuple[str, str]] | str:
    vp, u32 = ctypes.c_void_p, ctypes.c_uint32
    enumerate_devices = _bind(vk, "vkEnumeratePhysicalDevices", ctypes.c_int32, [vp, ctypes.POINTER(u32), vp])
    get_properties = _bind(vk, "vkGetPhysicalDeviceProperties", None, [vp, vp])
    count = u32(0)
    rc = enumerate_devices(instance, ctypes.byref(count), None)
    if rc != 0:
        return f"Vulkan loader failed: vkEnumeratePhysicalDevices returned {rc}"
    handles = (vp * max(count.value, 1))()
    rc = enumerate_devices(instance, ctypes.byref(count), handles)
    if rc not in (0, 5):  # 5: VK_INCOMPLETE, a device went away between the two calls
        return f"Vulkan loader failed: vkEnumeratePhysicalDevices returned {rc}"
    found = []
    for handle in handles[: count.value]:
        # VkPhysicalDeviceProperties is 824 bytes on x86-64; a larger buffer leaves room for any layout slack.
        # deviceType is the uint32 at offset 16, deviceName the 256-byte string after it.
        props = ctypes.create_string_buffer(4096)
        get_properties(handle, props)
        kind = int.from_bytes(props.raw[16:20], sys.byteorder)
        name = props.raw[20:276].split(b"\0", 1)[0].decode("utf-8", "replace")
        found.append((name, VK_TYPES[kind] if kind < len(VK_TYPES) else f"type {kind}"))
    return found


def probe(library: str = LOADER) -> list[tuple[str, str]] | str:
    """The Vulkan devices the loader lists, as (deviceName, type) pairs, or why there are none to list."""
    vk = _load(library)
    if isinstance(vk, str):
        return vk
    if not hasattr(vk, "vkCreateInstance"):
        return f"Vulkan loader failed: {library} has no vkCreateInstance"
    old = _too_old(vk)
    if old:
        return old
    vp = ctypes.c_void_p
    create = _bind(vk, "vkCreateInstance", ctypes.c_int32, [vp, vp, ctypes.POINTER(vp)])
    destroy = _bind(vk, "vkDestroyInstance", None, [vp, vp])
    info = _InstanceCreateInfo(sType=1)
    instance = vp()
    rc = create(ctypes.byref(info), None, ctypes.byref(instance))
    if rc != 0:
        name = VK_ERRORS.get(rc)
        return f"Vulkan loader failed: vkCreateInstance returned {rc}" + (f" ({name})" if name else "")
    try:
        return _devices(vk, instance)
    finally:
        destroy(instance, None)


def decide(requested: str, probe_result: list[tuple[str, str]] | str) -> tuple[str, str]:
    """(backend, reason) for DYNADRAFT_LLAMA_BACKEND=requested; auto picks vulkan where a Vulkan GPU is listed."""
    if requested not in CHOICES:
        raise ValueError(f"unknown DYNADRAFT_LLAMA_BACKEND={requested} (auto, cpu or vulkan)")
    if requested != "auto":
        return requested, f"DYNADRAFT_LLAMA_BACKEND={requested}"
    if isinstance(probe_result, str):
        return "cpu", probe_result
    gpus = [name for name, kind in probe_result if kind in GPU_TYPES]
    if gpus:
        return "vulkan", ", ".join(gpus)
    if not probe_result:
        return "cpu", "no Vulkan device: the loader lists none"
    if all(kind == "cpu" for _, kind in probe_result):
        return "cpu", "only a software Vulkan device (" + ", ".join(name for name, _ in probe_result) + ")"
    return "cpu", "no Vulkan GPU: the loader lists only " + ", ".join(f"{n} ({k})" for n, k in probe_result)


def parse_listing(text: str) -> list[tuple[str, str]] | str:
    """A listing as --listing and the child probe write it: [{"name", "type"}, ...] or {"error": ...}."""
    data = json.loads(text)
    if isinstance(data, dict):
        return str(data["error"])
    return [(str(d["name"]), VK_TYPES[d["type"]] if isinstance(d["type"], int) else str(d["type"])) for d in data]


def dump_listing(result: list[tuple[str, str]] | str) -> str:
    if isinstance(result, str):
        return json.dumps({"error": result})
    return json.dumps([{"name": name, "type": kind} for name, kind in result])


def probe_isolated(library: str = LOADER) -> list[tuple[str, str]] | str:
    """`probe` in a child process: a crash or hang inside a Vulkan driver becomes a reason, not a dead set-up."""
    cmd = [sys.executable, os.path.abspath(__file__), "--probe-only", "--library", library]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"Vulkan probe hung: no answer from {library} in {PROBE_TIMEOUT_S} s"
    if out.returncode != 0:
        how = f"signal {-out.returncode}" if out.returncode < 0 else f"exit {out.returncode}"
        return f"Vulkan probe crashed ({how}) in {library}"
    return parse_listing(out.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--name-only", action="store_true", help="print only the backend's name")
    ap.add_argument("--listing", default=os.environ.get("DYNADRAFT_VULKAN_LISTING") or None, metavar="FILE")
    ap.add_argument("--library", default=os.environ.get("DYNADRAFT_VULKAN_LIBRARY") or LOADER)
    ap.add_argument("--probe-only", action="store_true", help=argparse.SUPPRESS)  # the child of probe_isolated
    args = ap.parse_args(argv)
    if args.probe_only:
        print(dump_listing(probe(args.library)))
        return 0
    requested = os.environ.get("DYNADRAFT_LLAMA_BACKEND") or "auto"
    if requested != "auto":
        found: list[tuple[str, str]] | str = []  # an explicit (or unknown: decide says so) choice needs no probe
    elif args.listing:
        try:
            with open(args.listing, encoding="utf-8") as f:
                found = parse_listing(f.read())
        except (OSError, ValueError, LookupError, TypeError) as e:
            print(f"cannot read the device listing {args.listing}: {e}", file=sys.stderr)
            return 2
    else:
        found = probe_isolated(args.library)
    try:
        backend, reason = decide(requested, found)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    print(backend if args.name_only else f"backend: {backend} ({reason})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
