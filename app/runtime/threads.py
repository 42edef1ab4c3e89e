"""The default thread count for llama.cpp: one per physical core this process may use, as llama.cpp's own `-t`.

llama.cpp defaults `-t` to the physical cores (`common_cpu_get_num_math`: hyperthread siblings counted once),
because a second thread on a core's sibling does not speed up the matrix work and its spin-waits slow the other one.
`os.cpu_count()` counts logical CPUs: 32 on a 16-core Strix Halo. Unlike llama.cpp this also honours the CPU
affinity mask and a cgroup CPU quota, so a container limited to 16 CPUs of a 192-CPU host does not start 96 threads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path

SYSFS_CPU = Path("/sys/devices/system/cpu")
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def physical_cores(cpus: Iterable[int], sysfs: Path = SYSFS_CPU) -> int | None:
    """Distinct cores among `cpus` (their thread-sibling sets); None when the topology cannot be read."""
    cores: set[str] = set()
    for cpu in cpus:
        try:
            cores.add((sysfs / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text().strip())
        except OSError:
            return None
    return len(cores) or None


def cgroup_cpu_limit(cpu_max: Path = CGROUP_CPU_MAX) -> int | None:
    """CPUs a cgroup v2 quota allows ("200000 100000" -> 2), rounded up; None without a quota."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # no file, or "max" (no quota)
        return None


def allowed_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return list(range(os.cpu_count() or 1))


def default_threads(cpus: Iterable[int] | None = None, sysfs: Path = SYSFS_CPU, cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """Threads for decoding and prompt processing when the user sets none."""
    allowed = list(allowed_cpus() if cpus is None else cpus)
    n = physical_cores(allowed, sysfs)
    if n is None:  # llama.cpp's own fallback: half the logical CPUs above 4 (assumes two threads per core)
        n = len(allowed) if len(allowed) <= 4 else len(allowed) // 2
    limit = cgroup_cpu_limit(cpu_max)
    return max(1, min(n, limit) if limit else n)


def resolve_threads(n_threads: int) -> int:
    """A user's thread count, or the default for 0."""
    return n_threads if n_threads > 0 else default_threads()
