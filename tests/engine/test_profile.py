"""The engine profile every entry point resolves, and the fingerprint's notion of "the same setup"."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.engine.profile import EngineProfile, normalise_gpu_layers, recalibrate_command, resolve_profile
from app.models.runtime import Device
from tests.policy.helpers import FP

CPU = Device("CPU", "AMD Ryzen AI MAX+ 395", "CPU", "CPU", 0, 0)
IGPU = Device("Vulkan0", "AMD Radeon 8060S Graphics (RADV GFX1151)", "IGPU", "Vulkan", 0, 96 << 30)
LAVAPIPE = Device("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "CPU", "Vulkan", 0, 0)


def test_gpu_layers_come_from_device_detection_and_a_flag_wins() -> None:
    assert resolve_profile(devices=[CPU]).n_gpu_layers == 0
    assert resolve_profile(devices=[CPU, IGPU]).n_gpu_layers == -1  # every layer on a real GPU
    assert resolve_profile(devices=[CPU, LAVAPIPE]).n_gpu_layers == 0  # never a software device by default
    assert resolve_profile(gpu_layers=12, devices=[CPU, IGPU]).n_gpu_layers == 12
    assert resolve_profile(gpu_layers=0, devices=[CPU, IGPU]).n_gpu_layers == 0


def test_defaults_and_refusals() -> None:
    p = resolve_profile(devices=[CPU])
    assert p == EngineProfile(4096, 0, "auto", 512, 0)
    assert EngineProfile.from_dict(p.to_dict()) == p and EngineProfile.from_dict({"n_ctx": "x"}) is None
    with pytest.raises(ValueError):
        resolve_profile(flash_attn="maybe")
    with pytest.raises(ValueError):
        resolve_profile(ctx_size=8)


def test_all_layers_is_one_value() -> None:
    assert {normalise_gpu_layers(n) for n in (-1, -5, 999, 4096)} == {-1}
    assert normalise_gpu_layers(30, n_layer=30) == -1 and normalise_gpu_layers(12, n_layer=30) == 12
    table, now = replace(FP, n_gpu_layers=999), replace(FP, n_gpu_layers=-1)
    assert table.matches(now) and table.differences(now) == []
    assert replace(FP, n_gpu_layers=12).differences(now) == ["n_gpu_layers"]


def test_only_frontier_fields_make_a_table_stale() -> None:
    assert FP.matches(replace(FP, n_ctx=4096, draft_name="renamed.gguf"))  # window size and file name do not count
    stale = replace(FP, n_threads=8, flash_attn="on")
    assert FP.differences(stale) == ["n_threads", "flash_attn"]
    assert FP.describe_differences(stale) == ["n_threads: table 2, now 8", "flash_attn: table off, now on"]


def test_the_recalibrate_command_reproduces_the_profile() -> None:
    cmd = recalibrate_command("/m/a b.gguf", "/m/d.gguf", resolve_profile(threads=3, flash_attn="off"))
    assert cmd.startswith("dynadraft calibrate --model '/m/a b.gguf' --draft /m/d.gguf --quick")
    assert "--threads 3" in cmd and "--flash-attn off" in cmd and "--ctx-size" not in cmd
