"""The engine configuration a frontier table was measured on; a table applies only on an exact match."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from app.runtime.device import FLASH_ATTN_MODES


@dataclass(frozen=True)
class Fingerprint:
    """Everything that changes measured tok/s enough to invalidate a calibration.

    target_sha256: the target GGUF's sha256; draft_name / draft_sha256: the draft GGUF (None when no draft model);
    backend: e.g. "cpu", "vulkan", "rocm"; device: the device name the backend reports; llama_build: the llama.cpp
    build (commit or llama-cpp-python version); n_ctx, n_gpu_layers, n_threads, flash_attn: the context settings.
    """

    target_sha256: str
    draft_name: str | None
    draft_sha256: str | None
    backend: str
    device: str
    llama_build: str
    n_ctx: int
    n_gpu_layers: int
    n_threads: int
    flash_attn: str  # one of FLASH_ATTN_MODES

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fingerprint:
        """Parse strictly: every field present, no extras, basic types checked (a table file may be hand-edited)."""
        if not isinstance(data, dict):
            raise ValueError("fingerprint must be an object")
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in data]
        extra = sorted(set(data) - set(names))
        if missing or extra:
            raise ValueError(f"fingerprint fields: missing {missing}, unknown {extra}")
        for n in ("target_sha256", "backend", "device", "llama_build"):
            if not isinstance(data[n], str):
                raise ValueError(f"fingerprint.{n} must be a string")
        for n in ("draft_name", "draft_sha256"):
            if data[n] is not None and not isinstance(data[n], str):
                raise ValueError(f"fingerprint.{n} must be a string or null")
        for n in ("n_ctx", "n_gpu_layers", "n_threads"):
            if not isinstance(data[n], int) or isinstance(data[n], bool):
                raise ValueError(f"fingerprint.{n} must be an integer")
        data = dict(data)
        if isinstance(data["flash_attn"], bool):  # tables written before "auto" existed stored a boolean
            data["flash_attn"] = "on" if data["flash_attn"] else "off"
        if data["flash_attn"] not in FLASH_ATTN_MODES:
            raise ValueError("fingerprint.flash_attn must be 'auto', 'on' or 'off'")
        return cls(**data)

    def differences(self, other: Fingerprint) -> list[str]:
        """Names of the fields that differ (of FRONTIER_FIELDS only), for a visible `stale_table` explanation."""
        return [n for n in FRONTIER_FIELDS if _canonical(n, getattr(self, n)) != _canonical(n, getattr(other, n))]

    def matches(self, other: Fingerprint) -> bool:
        """A table measured on `self` applies to an engine with fingerprint `other`."""
        return not self.differences(other)

    def describe_differences(self, other: Fingerprint) -> list[str]:
        """ "n_threads: table 2, now 1" for each differing field (self: the table's, other: the engine's)."""
        return [f"{n}: table {getattr(self, n)}, now {getattr(other, n)}" for n in self.differences(other)]


# The fields that decide whether a table applies, each because it changes measured speed (the frontier):
FRONTIER_FIELDS = (
    "target_sha256",  # another target (or quantisation) has other costs and other acceptance
    "draft_sha256",  # another draft drafts other tokens at another cost (None: no draft model)
    "backend",  # CPU, Vulkan, ROCm... run different kernels: the verify-cost curve differs
    "device",  # another GPU/CPU model has other bandwidth and compute
    "llama_build",  # kernels change between llama.cpp versions
    "n_gpu_layers",  # partial offload splits each step between devices; all layers is one value (-1)
    "n_threads",  # CPU decoding speed scales with threads
    "flash_attn",  # on the H200 (Vulkan) it changed a 2-8 token verify from 2.6-55x one token to 1.2-4.4x
)
# Recorded for display but not compared: draft_name (draft_sha256 identifies the draft), and n_ctx (the frontier is
# keyed by prompt length; llama.cpp attends over the KV cells in use, not the whole window, so a table measured
# with an 8192-token window holds for a 4096-token one at the same prompt lengths).


def _canonical(name: str, value: Any) -> Any:
    """Equivalent settings compare equal: -1, 999 (and more) GPU layers all mean every layer."""
    if name == "n_gpu_layers" and isinstance(value, int) and (value < 0 or value >= 999):
        return -1
    return value
