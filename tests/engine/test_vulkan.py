"""Vulkan: device recognition (pure, always run) and the engine on a Vulkan device (marker `vulkan`).

The engine tests run in a subprocess because ggml-vulkan picks its devices once, when libggml loads: the variable
GGML_VK_VISIBLE_DEVICES=0, which makes Mesa's lavapipe (a CPU implementation of Vulkan, which ggml otherwise skips)
usable, must be set before `import llama_cpp`, and other tests in this process have imported it already.
Build the Vulkan wheel with scripts/build-vulkan.sh; without it these tests skip and say why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.runtime.device import (
    ALL_LAYERS,
    Device,
    accelerators,
    classify,
    default_gpu_layers,
    describe_active,
    is_strix_halo,
    resolve_flash_attn,
    short_name,
)

GB = 1 << 30


def dev(name: str, description: str, type_: str, backend: str = "Vulkan", total: int = 0) -> Device:
    return Device(name, description, type_, backend, total, total)


CPU = dev("CPU", "AMD Ryzen AI MAX+ 395 w/ Radeon 8060S", "CPU", backend="CPU")


# -- pure parts ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "description",
    [
        "AMD Radeon 8060S Graphics (RADV GFX1151)",
        "AMD Radeon(TM) 8060S Graphics",
        "AMD Radeon 8050S Graphics (RADV GFX1151)",
        "AMD Radeon Graphics (RADV GFX1151)",
        "AMD Radeon Graphics (gfx1151)",
        "Radeon 8060S",
        "AMD Strix Halo",
    ],
)
def test_strix_halo_descriptions_are_recognised(description: str) -> None:
    assert is_strix_halo(description)


@pytest.mark.parametrize(
    "description",
    [
        "AMD Radeon 890M Graphics (RADV GFX1150)",  # Strix Point, not Halo
        "AMD Radeon RX 7900 XTX (RADV NAVI31)",
        "AMD Radeon 780M (RADV GFX1103_R1)",
        "NVIDIA H200",
        "llvmpipe (LLVM 15.0.6, 256 bits)",
        "AMD Radeon 8060 Pro",  # no "S"
        "",
    ],
)
def test_other_devices_are_not_strix_halo(description: str) -> None:
    assert not is_strix_halo(description)


def test_short_names_for_the_status_bar() -> None:
    assert short_name("AMD Radeon 8060S Graphics (RADV GFX1151)") == "Radeon 8060S"
    assert short_name("AMD Radeon(TM) 8050S Graphics") == "Radeon 8050S"
    assert short_name("NVIDIA H200") == "NVIDIA H200"
    assert short_name("AMD Radeon RX 7900 XTX (RADV NAVI31)") == "Radeon RX 7900 XTX"
    assert short_name("llvmpipe (LLVM 15.0.6, 256 bits)") == "llvmpipe"


def test_classification_and_offload_defaults() -> None:
    halo_radv = dev("Vulkan0", "AMD Radeon 8060S Graphics (RADV GFX1151)", "IGPU", total=96 * GB)
    halo_reported_as_gpu = dev("Vulkan0", "AMD Radeon(TM) 8060S Graphics", "GPU")  # still unified memory
    h200 = dev("Vulkan0", "NVIDIA H200", "GPU", total=140 * GB)
    lavapipe = dev("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "IGPU")
    assert classify(CPU) == "cpu"
    assert classify(halo_radv) == "unified" and classify(halo_reported_as_gpu) == "unified"
    assert classify(h200) == "discrete"
    assert classify(lavapipe) == "software"
    assert default_gpu_layers([CPU, halo_radv]) == ALL_LAYERS
    assert default_gpu_layers([h200, CPU]) == ALL_LAYERS
    assert default_gpu_layers([CPU]) == 0
    assert default_gpu_layers([lavapipe, CPU]) == 0  # slower than ggml's own CPU backend
    assert default_gpu_layers([]) == 0
    # a real GPU is preferred over a software device whatever the registry order
    assert accelerators([lavapipe, h200, CPU])[0].description == "NVIDIA H200"
    assert accelerators([CPU, halo_radv])[0].strix_halo


def test_describe_active() -> None:
    halo = dev("Vulkan0", "AMD Radeon 8060S Graphics (RADV GFX1151)", "IGPU")
    lavapipe = dev("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "IGPU")
    assert describe_active(None, [CPU, halo]) == "Vulkan · Radeon 8060S"
    assert describe_active(-1, [dev("Vulkan0", "NVIDIA H200", "GPU"), CPU]) == "Vulkan · NVIDIA H200"
    assert describe_active(12, [halo, CPU]) == "Vulkan · Radeon 8060S (12 layers)"
    assert describe_active(-1, [lavapipe, CPU]) == "Vulkan · llvmpipe (software)"
    assert describe_active(None, [lavapipe, CPU]).startswith("CPU · ")
    assert describe_active(0, [halo, CPU]).startswith("CPU · ")
    assert describe_active(-1, [CPU]).startswith("CPU · ")


# -- the engine on a Vulkan device ------------------------------------------------------------------------------
def test_flash_attention_auto_is_off_only_on_a_software_vulkan_device() -> None:
    lavapipe = dev("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "GPU")
    radeon = dev("Vulkan0", "AMD Radeon 8060S Graphics (RADV GFX1151)", "IGPU", total=96 * GB)
    assert resolve_flash_attn("auto", ALL_LAYERS, [CPU, lavapipe]) == "off"  # ggml-vulkan FA crashed lavapipe
    assert resolve_flash_attn("auto", ALL_LAYERS, [CPU, radeon]) == "auto"
    assert resolve_flash_attn("auto", 0, [CPU, lavapipe]) == "auto"  # nothing offloaded: the CPU runs it
    assert resolve_flash_attn("on", ALL_LAYERS, [CPU, lavapipe]) == "on"  # an explicit choice is honoured
    assert resolve_flash_attn("off", ALL_LAYERS, [CPU, radeon]) == "off"


_CHILD = r"""
import json, sys
from app.runtime.device import backend_names, describe_active, has_vulkan_backend
from app.runtime.device import list_devices
out = {"backends": backend_names(), "devices": [d.description for d in list_devices() if d.type != "CPU"]}
if not has_vulkan_backend() or not out["devices"]:
    print(json.dumps(out)); sys.exit(0)
from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN, SpecSettings
model, draft = sys.argv[1], sys.argv[2]
s = Session(EngineConfig(model=model, draft=draft, n_ctx=1024, n_batch=128, n_gpu_layers=-1, dynamic_draft=False))
out["describe"] = describe_active(-1)
prompt = "Write a Python function that returns the n-th Fibonacci number, with a docstring."
runs = {}
for label, spec in [("plain", PLAIN), ("draft", SpecSettings("draft", 4)), ("lookup", SpecSettings("lookup", 6))]:
    req = GenerationRequest(messages=({"role": "user", "content": prompt},), max_tokens=32,
                            sampling=SamplingParams(temperature=0.0), speculative=spec)
    done = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
    runs[label] = {"tokens": list(done.tokens), "text": done.text, "steps": done.steps,
                   "accepted": done.timings.draft_n_accepted, "tps": done.timings.predicted_per_second}
s.close()
out["runs"] = runs
print(json.dumps(out))
"""


def _run_child(model: Path, draft: Path) -> tuple[dict, str]:
    env = dict(os.environ)
    env.setdefault("GGML_VK_VISIBLE_DEVICES", "0")  # lets lavapipe (a CPU-type Vulkan device) be used
    env["DYNADRAFT_LLAMA_LOG"] = "1"  # llama.cpp's own log to stderr: it says where the layers went
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, str(model), str(draft)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


@pytest.mark.vulkan
def test_engine_generates_on_a_vulkan_device(smollm2_path: Path, smollm2_q2k_path: Path) -> None:
    out, log = _run_child(smollm2_path, smollm2_q2k_path)
    if "Vulkan" not in out["backends"]:
        pytest.skip(
            f"the installed llama-cpp-python has no Vulkan backend (backends: {out['backends']}); "
            "build it with scripts/build-vulkan.sh"
        )
    if not out["devices"]:
        pytest.skip("Vulkan backend present but no Vulkan device (install mesa-vulkan-drivers for lavapipe)")
    assert out["describe"].startswith("Vulkan · "), out
    assert "offloaded" in log and "layers to GPU" in log
    offload = [ln for ln in log.splitlines() if "offloaded" in ln and "layers to GPU" in ln]
    n_done, n_all = offload[0].split("offloaded", 1)[1].split("layers")[0].strip().split("/")
    assert n_done == n_all, offload  # every layer of the target on the Vulkan device
    runs = out["runs"]
    assert runs["plain"]["text"].strip(), runs
    # speculative decoding stays exact on the Vulkan device: greedy output is the same with either draft source
    assert runs["draft"]["tokens"] == runs["plain"]["tokens"]
    assert runs["lookup"]["tokens"] == runs["plain"]["tokens"]
    assert runs["draft"]["accepted"] > 0
