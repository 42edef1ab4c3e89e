"""The default thread count: physical cores (hyperthread siblings once), within the affinity mask and cgroup quota."""

from __future__ import annotations

import os
from pathlib import Path

from app.runtime.llama import Context, ContextParams, Model
from app.runtime.threads import cgroup_cpu_limit, default_threads, physical_cores


def fake_sysfs(root: Path, siblings: dict[int, str]) -> Path:
    for cpu, sib in siblings.items():
        d = root / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(sib + "\n")
    return root


def test_smt_siblings_count_once(tmp_path: Path) -> None:
    # A 16-core/32-thread part (Strix Halo's Ryzen AI Max+ 395): Linux numbers sibling i and i + 16.
    sysfs = fake_sysfs(tmp_path, {c: f"{c % 16},{c % 16 + 16}" for c in range(32)})
    assert physical_cores(range(32), sysfs) == 16
    assert default_threads(range(32), sysfs, tmp_path / "no-cpu.max") == 16
    # Pinned to 4 CPUs that are two cores' siblings: 2 threads.
    assert default_threads([0, 1, 16, 17], sysfs, tmp_path / "no-cpu.max") == 2


def test_without_topology_half_above_four(tmp_path: Path) -> None:
    assert physical_cores(range(8), tmp_path) is None
    assert default_threads(range(8), tmp_path, tmp_path / "none") == 4
    assert default_threads(range(3), tmp_path, tmp_path / "none") == 3


def test_cgroup_quota_caps(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path / "sys", {c: str(c) for c in range(64)})
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("max 100000\n")
    assert cgroup_cpu_limit(cpu_max) is None
    assert default_threads(range(64), sysfs, cpu_max) == 64
    cpu_max.write_text("1550000 100000\n")  # 15.5 CPUs
    assert cgroup_cpu_limit(cpu_max) == 16
    assert default_threads(range(64), sysfs, cpu_max) == 16


def test_a_context_with_default_threads_uses_this_machine_s_cores(smollm2_path: Path) -> None:
    """What llama.cpp is actually given, on this machine's real topology."""
    model = Model(smollm2_path)
    try:
        ctx = Context(model, ContextParams(n_ctx=64))
        try:
            assert ctx.n_threads == default_threads()
            assert 1 <= ctx.n_threads <= len(os.sched_getaffinity(0))
        finally:
            ctx.close()
    finally:
        model.close()
