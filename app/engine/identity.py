"""Who measured what: file hashes (cached), the active backend/device, and the calibration fingerprint of a session."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.models.integrity import sha256_file
from app.paths import get_paths
from app.policy.fingerprint import Fingerprint

if TYPE_CHECKING:
    from app.engine.config import EngineConfig
from app.runtime import build_info
from app.runtime.device import best_accelerator, cpu_name


def _hash_cache() -> Path:
    """The file that remembers model hashes by (path, size, mtime)."""
    return get_paths().cache / "sha256.json"


def _known_hashes(path: str | Path) -> tuple[str, dict[str, str]]:
    """(the hash cache's key for this file version, what the cache holds)."""
    p = Path(path).resolve()
    st = p.stat()
    try:
        known = json.loads(_hash_cache().read_text())
    except (OSError, ValueError):
        known = {}
    return f"{p}|{st.st_size}|{st.st_mtime_ns}", known


def is_hashed(path: str | Path) -> bool:
    """Whether cached_sha256 already knows this version of the file (no hashing to wait for)."""
    key, known = _known_hashes(path)
    return key in known


def cached_sha256(
    path: str | Path,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> str:
    """sha256 of a model file, remembered by (path, size, mtime) so a 1 GB model is hashed once, not every start;
    `progress` and `cancel` as sha256_file's (a first look at a large file)."""
    p = Path(path).resolve()
    key, known = _known_hashes(p)
    if key in known:
        return str(known[key])
    cache_file = _hash_cache()
    digest = sha256_file(p, progress=progress, cancel=cancel)
    known[key] = digest
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache_file.with_name(cache_file.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(known))
    os.replace(tmp, cache_file)
    return digest


def active_device(n_gpu_layers: int) -> tuple[str, str]:
    """(backend, device name) that runs the model: the accelerator layers go to when offloading, else the CPU."""
    if n_gpu_layers != 0:
        try:
            # Software Vulkan (lavapipe) counts too: it is what runs when GGML_VK_VISIBLE_DEVICES selects it.
            acc = best_accelerator(allow_software=True)
            if acc is not None:
                return acc.backend.lower(), acc.description or acc.name
        except Exception:  # no registry: report the CPU, which is what will run
            pass
    return "cpu", cpu_name()


def llama_build() -> str:
    return f"llama-cpp-python {build_info.bindings_version()}"


def config_fingerprint(
    cfg: EngineConfig, n_ctx: int, n_threads: int, build: str, n_layer: int | None = None
) -> Fingerprint:
    """The fingerprint of an EngineConfig running with this context size and thread count on runtime `build`."""
    from app.engine.profile import normalise_gpu_layers
    from app.runtime.device import resolve_flash_attn

    backend, device = active_device(cfg.n_gpu_layers)
    # Offload is meaningless without an accelerator (0), and every layer is one value however it was spelt.
    layers = 0 if backend == "cpu" else normalise_gpu_layers(cfg.n_gpu_layers, n_layer)
    return Fingerprint(
        target_sha256=cached_sha256(cfg.model),
        draft_name=Path(cfg.draft).name if cfg.draft else None,
        draft_sha256=cached_sha256(cfg.draft) if cfg.draft else None,
        backend=backend,
        device=device,
        llama_build=build,
        n_ctx=n_ctx,
        n_gpu_layers=layers,
        n_threads=n_threads,
        flash_attn=resolve_flash_attn(cfg.flash_attn, cfg.n_gpu_layers),  # what llama.cpp was given
    )
