"""Child processes that die with us: Linux parent-death signal, Windows kill-on-close job object."""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _linux_preexec() -> Callable[[], None] | None:
    """A preexec_fn that asks the kernel to SIGKILL the child when its parent goes, however the parent dies."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def tie() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl: nothing would signal us
            os._exit(1)

    return tie


class _Spawner:
    """One thread that lives as long as the process and does every fork.

    The parent-death signal fires when the *thread* that forked the child ends, not the process; forking from a
    short-lived thread (a GUI background call) would kill the server as soon as that thread returned.
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="dynadraft-spawner", daemon=True)
                self._thread.start()
        fut: Future[Any] = Future()
        self._jobs.put((fn, fut))
        return fut.result()

    def _loop(self) -> None:
        while True:
            fn, fut = self._jobs.get()
            try:
                fut.set_result(fn())
            except BaseException as e:  # handed to the caller
                fut.set_exception(e)


_spawner = _Spawner()
_jobs: list[Any] = []  # Windows job handles: closing one (at our exit) kills its processes


def _windows_tie(proc: subprocess.Popen[bytes]) -> None:
    """Put `proc` in a job object that kills it when DynaDraft's last handle to the job closes (at any exit).

    Not exercised by the Linux test suite; kept to the documented Win32 calls.
    """
    from ctypes import wintypes

    class IoCounters(ctypes.Structure):
        _fields_ = [(n, ctypes.c_ulonglong) for n in ("r_ops", "w_ops", "o_ops", "r_bytes", "w_bytes", "o_bytes")]

    class BasicLimits(ctypes.Structure):
        _fields_ = [
            ("PerProcessUserTimeLimit", ctypes.c_int64),
            ("PerJobUserTimeLimit", ctypes.c_int64),
            ("LimitFlags", wintypes.DWORD),
            ("MinimumWorkingSetSize", ctypes.c_size_t),
            ("MaximumWorkingSetSize", ctypes.c_size_t),
            ("ActiveProcessLimit", wintypes.DWORD),
            ("Affinity", ctypes.c_size_t),
            ("PriorityClass", wintypes.DWORD),
            ("SchedulingClass", wintypes.DWORD),
        ]

    class ExtendedLimits(ctypes.Structure):
        _fields_ = [
            ("BasicLimitInformation", BasicLimits),
            ("IoInfo", IoCounters),
            ("ProcessMemoryLimit", ctypes.c_size_t),
            ("JobMemoryLimit", ctypes.c_size_t),
            ("PeakProcessMemoryUsed", ctypes.c_size_t),
            ("PeakJobMemoryUsed", ctypes.c_size_t),
        ]

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    job = kernel32.CreateJobObjectW(None, None)
    if not job:
        return
    info = ExtendedLimits()
    info.BasicLimitInformation.LimitFlags = 0x2000  # JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    extended_limit_information = 9  # JobObjectExtendedLimitInformation
    kernel32.SetInformationJobObject(job, extended_limit_information, ctypes.byref(info), ctypes.sizeof(info))
    kernel32.AssignProcessToJobObject(job, wintypes.HANDLE(int(proc._handle)))  # type: ignore[attr-defined]
    _jobs.append(job)


def popen_tied(cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """subprocess.Popen whose child is killed when this process dies, even by SIGKILL (Linux) or a crash (Windows)."""
    if sys.platform == "win32":
        proc: subprocess.Popen[bytes] = subprocess.Popen(cmd, **kwargs)
        try:
            _windows_tie(proc)
        except OSError:
            pass  # without the job the server still stops with us on a normal exit (atexit)
        return proc
    preexec = _linux_preexec()
    if preexec is None:
        return subprocess.Popen(cmd, **kwargs)
    spawned: subprocess.Popen[bytes] = _spawner.run(lambda: subprocess.Popen(cmd, preexec_fn=preexec, **kwargs))
    return spawned
