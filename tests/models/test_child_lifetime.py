"""A llama-server started by DynaDraft dies with it (even on SIGKILL), and a taken port is retried, not fatal."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.runtime import llama_server as external
from app.runtime.llama_server import ExternalServer, ServerSpec, port_taken

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")
REPO_ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped by init counts as gone: it serves nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _gone_soon(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(t) for t in text]
    return out


_PARENT = """
import sys, threading, time
from app.runtime.child_process import popen_tied
pids = []
# From a thread that ends at once: the parent-death signal must follow the process, not this thread.
t = threading.Thread(target=lambda: pids.append(popen_tied(["sleep", "600"]).pid))
t.start(); t.join()
print(pids[0], flush=True)
time.sleep(600)
"""


def test_tied_child_dies_with_its_sigkilled_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    child = None
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(0.3)
        assert _alive(child)  # the spawning thread has ended; the child is still there
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(30)
        assert _gone_soon(child), "the child outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)


def test_llama_server_dies_when_dynadraft_is_sigkilled(llama_server_binary: str, smollm2_path: Path) -> None:
    cmd = [sys.executable, "-m", "app", "serve", "--model", str(smollm2_path), "--port", "0", "--threads", "1"]
    cmd += ["--ctx-size", "512", "--server-binary", llama_server_binary]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO_ROOT)
    server_pid = None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once the engine (and so llama-server) is up
        assert re.search(r"http://127\.0\.0\.1:\d+/v1", line), line
        servers = [c for c in _children(proc.pid) if "llama-server" in Path(f"/proc/{c}/cmdline").read_text()]
        assert len(servers) == 1, servers
        server_pid = servers[0]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        # Before the fix the server kept running (and serving) after its parent was gone.
        assert _gone_soon(server_pid), f"llama-server {server_pid} outlived DynaDraft"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if server_pid is not None and _alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def test_server_started_from_a_short_lived_thread_survives_it(llama_server_binary: str, smollm2_path: Path) -> None:
    # The parent-death signal follows the forking *thread*: a GUI background call that returns must not kill it.
    spec = ServerSpec(binary=llama_server_binary, model=str(smollm2_path), n_ctx=256, n_threads=1)
    server = ExternalServer(spec)
    t = threading.Thread(target=server.start)
    t.start()
    t.join(300)
    try:
        assert server.running
        time.sleep(0.5)  # a PDEATHSIG from the finished thread would have arrived by now
        assert server.running and server.request("GET", "/health", timeout=5)[0] == 200
    finally:
        server.stop()


def test_taken_port_is_retried(llama_server_binary: str, smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    taken = holder.getsockname()[1]
    real = external.free_port
    picks = iter([taken])
    # Simulates losing the race: our first pick is grabbed by another program before llama-server binds it.
    monkeypatch.setattr(external, "free_port", lambda: next(picks, None) or real())
    spec = ServerSpec(binary=llama_server_binary, model=str(smollm2_path), n_ctx=256, n_threads=1)
    try:
        with ExternalServer(spec) as server:
            assert server.running and server.port != taken
    finally:
        holder.close()


def test_port_taken_reads_the_log() -> None:
    assert port_taken("srv  start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080")
    assert not port_taken("model file not found")
