"""Which llama.cpp backend the set-up builds: scripts/choose_backend.py's probe and rule, and setup.sh --explain."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "choose_backend.py"
# Example device names, shaped like the drivers' (RADV's name for the Strix Halo iGPU, Mesa's lavapipe).
HALO = ("AMD Radeon 8060S Graphics (RADV GFX1151)", "integrated-gpu")
LLVMPIPE = ("llvmpipe (LLVM 15.0.6, 256 bits)", "cpu")


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("choose_backend", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cb = _module()


def test_auto_builds_vulkan_for_a_vulkan_gpu_and_names_it() -> None:
    assert cb.decide("auto", [LLVMPIPE, HALO]) == ("vulkan", HALO[0])
    assert cb.decide("auto", [("NVIDIA H100 80GB HBM3", "discrete-gpu")])[0] == "vulkan"
    assert cb.decide("auto", [("a virtual GPU", "virtual-gpu")])[0] == "vulkan"


def test_auto_builds_for_the_cpu_without_a_usable_vulkan_gpu_and_says_why() -> None:
    assert cb.decide("auto", [LLVMPIPE]) == ("cpu", f"only a software Vulkan device ({LLVMPIPE[0]})")
    assert cb.decide("auto", []) == ("cpu", "no Vulkan device: the loader lists none")
    broken = "Vulkan loader failed: vkCreateInstance returned -9"
    assert cb.decide("auto", broken) == ("cpu", broken)
    backend, reason = cb.decide("auto", [("something", "other")])
    assert backend == "cpu" and "something" in reason


def test_an_explicit_choice_is_kept_and_an_unknown_one_refused() -> None:
    assert cb.decide("cpu", [HALO]) == ("cpu", "DYNADRAFT_LLAMA_BACKEND=cpu")
    assert cb.decide("vulkan", "no Vulkan loader (libvulkan.so.1 not found)") == (
        "vulkan",
        "DYNADRAFT_LLAMA_BACKEND=vulkan",
    )
    with pytest.raises(ValueError, match="unknown DYNADRAFT_LLAMA_BACKEND=gpu"):
        cb.decide("gpu", [])


def test_the_real_probe_gives_a_sane_decision(tmp_path: Path) -> None:
    found = cb.probe()  # whatever this machine has: no loader, no driver, lavapipe or a GPU
    assert isinstance(found, str) or all(isinstance(n, str) and k for n, k in found), found
    backend, reason = cb.decide("auto", found)
    assert backend in ("cpu", "vulkan") and reason
    if backend == "vulkan":
        assert any(kind in cb.GPU_TYPES for _, kind in found)
    assert cb.probe_isolated() == found  # the CLI's way: the same answer from a child process
    missing = cb.probe(str(tmp_path / "libvulkan.so.1"))
    assert missing == f"no Vulkan loader ({tmp_path / 'libvulkan.so.1'} not found)"
    (tmp_path / "broken.so").write_text("not a library")
    assert str(cb.probe(str(tmp_path / "broken.so"))).startswith("Vulkan loader failed: ")


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DYNADRAFT_LLAMA", "DYNADRAFT_VULKAN"))}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=base | env, timeout=60
    )


def test_the_command_line_prints_one_line_from_a_listing_or_the_probe(tmp_path: Path) -> None:
    listing = tmp_path / "devices.json"
    listing.write_text(json.dumps([{"name": n, "type": t} for n, t in (LLVMPIPE, HALO)]))
    assert _cli("--listing", str(listing)).stdout == f"backend: vulkan ({HALO[0]})\n"
    assert _cli("--name-only", DYNADRAFT_VULKAN_LISTING=str(listing)).stdout == "vulkan\n"
    listing.write_text(json.dumps({"error": "Vulkan loader failed: vkCreateInstance returned -9"}))
    assert (
        _cli("--listing", str(listing)).stdout == "backend: cpu (Vulkan loader failed: vkCreateInstance returned -9)\n"
    )
    assert (
        _cli("--listing", str(listing), DYNADRAFT_LLAMA_BACKEND="vulkan").stdout
        == "backend: vulkan (DYNADRAFT_LLAMA_BACKEND=vulkan)\n"
    )
    nothing = _cli("--library", str(tmp_path / "none.so"))
    assert nothing.stdout == f"backend: cpu (no Vulkan loader ({tmp_path / 'none.so'} not found))\n"
    assert re.fullmatch(r"backend: (cpu|vulkan) \(.+\)\n", _cli().stdout)
    unknown = _cli(DYNADRAFT_LLAMA_BACKEND="gpu")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.strip().splitlines() == ["unknown DYNADRAFT_LLAMA_BACKEND=gpu (auto, cpu or vulkan)"]


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The repository's scripts alone in a folder (no .venv), with the caches under tmp_path."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    return repo


def _setup(repo: Path, *args: str, devices: object = None, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DYNADRAFT_")}
    base |= {
        "DYNADRAFT_WHEEL_CACHE": str(repo.parent / "wheels"),
        "DYNADRAFT_TOOLS_CACHE": str(repo.parent / "tools"),
        "DYNADRAFT_VK_SIDE": str(repo.parent / "vulkan-headers"),
    }
    if devices is not None:
        (repo.parent / "devices.json").write_text(json.dumps(devices))
        base["DYNADRAFT_VULKAN_LISTING"] = str(repo.parent / "devices.json")
    return subprocess.run(
        [str(repo / "scripts" / "setup.sh"), *args], capture_output=True, text=True, env=base | env, timeout=60
    )


def test_setup_explain_says_the_choice_in_a_line_and_builds_nothing(clone: Path) -> None:
    software = [{"name": LLVMPIPE[0], "type": "cpu"}]
    out = _setup(clone, "--explain", devices=software)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"backend: cpu (only a software Vulkan device ({LLVMPIPE[0]}))\n"
    out = _setup(clone, "--explain", devices={"error": "no Vulkan loader (libvulkan.so.1 not found)"})
    assert out.stdout == "backend: cpu (no Vulkan loader (libvulkan.so.1 not found))\n"
    # A GPU: the choice, then one line on what building for it needs (what this machine has decides which).
    out = _setup(clone, "--explain", devices=[*software, {"name": HALO[0], "type": "integrated-gpu"}])
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first == f"backend: vulkan ({HALO[0]})"
    assert second.startswith("vulkan prerequisites: ")
    out = _setup(clone, "--explain", devices=software, DYNADRAFT_LLAMA_BACKEND="vulkan")
    assert out.stdout.splitlines()[0] == "backend: vulkan (DYNADRAFT_LLAMA_BACKEND=vulkan)"
    out = _setup(clone, "--explain", DYNADRAFT_LLAMA_BACKEND="gpu")
    assert out.returncode == 2 and "unknown DYNADRAFT_LLAMA_BACKEND=gpu" in out.stderr
    assert sorted(p.name for p in clone.parent.iterdir()) == ["devices.json", "repo"]  # no cache folder, no wheel
    assert sorted(p.name for p in clone.iterdir()) == ["scripts"]  # no .venv


def _flags(repo: Path, *names: str, **env: str) -> list[str]:
    script = ". scripts/llama-build-flags.sh && " + " && ".join(f'echo "${n}"' for n in names)
    base = {k: v for k, v in os.environ.items() if not k.startswith("DYNADRAFT_")}
    base |= {"DYNADRAFT_WHEEL_CACHE": str(repo.parent / "wheels"), "DYNADRAFT_TOOLS_CACHE": str(repo.parent / "tools")}
    out = subprocess.run(["bash", "-c", script], cwd=repo, capture_output=True, text=True, env=base | env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_auto_without_a_gpu_keeps_the_cpu_wheels_cache_folder(clone: Path) -> None:
    (clone.parent / "soft.json").write_text(json.dumps([{"name": LLVMPIPE[0], "type": "cpu"}]))
    auto = _flags(clone, "BACKEND", "WHEELS", DYNADRAFT_VULKAN_LISTING=str(clone.parent / "soft.json"))
    assert auto == _flags(clone, "BACKEND", "WHEELS", DYNADRAFT_LLAMA_BACKEND="cpu")
    assert auto[0] == "cpu"


def test_the_servers_follow_the_backend_setup_recorded_for_the_wheel(clone: Path) -> None:
    (clone / ".venv").mkdir()
    record = clone / ".venv" / ".dynadraft-llama"
    gpu = clone.parent / "gpu.json"
    gpu.write_text(json.dumps([{"name": HALO[0], "type": "integrated-gpu"}]))
    record.write_text("cpu\n\n")  # e.g. auto fell back to the CPU wheel on a machine that has a GPU
    assert _flags(clone, "BACKEND", DYNADRAFT_VULKAN_LISTING=str(gpu)) == ["cpu"]
    record.write_text("vulkan\n-DVulkan_INCLUDE_DIR=/example/include\n")
    backend, args = _flags(clone, "BACKEND", "LLAMA_CMAKE_ARGS")
    assert backend == "vulkan" and args.endswith("-DGGML_VULKAN=ON -DVulkan_INCLUDE_DIR=/example/include")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNADRAFT_")}
    env["DYNADRAFT_TOOLS_CACHE"] = str(clone.parent / "tools")
    server = subprocess.run(
        [str(clone / "scripts" / "build-llama-server.sh"), "--path"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert Path(server.stdout.strip()).parent.name.startswith("llama-server-vulkan-"), server.stderr
