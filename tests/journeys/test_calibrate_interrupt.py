"""Ctrl+C in `dynadraft calibrate` (a real subprocess, SIGINT mid-sweep): it stops at once and says truthfully
whether a table was written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.journeys.helpers import ROOT, THREADS


def _wait_for_progress(proc: subprocess.Popen[bytes], runs: int, timeout: float = 240.0) -> bytes:
    """Read the progress line (redrawn with \\r) until the sweep has finished `runs` runs."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk:
            break
        seen += chunk
        for frame in seen.split(b"\r")[-2:]:
            if frame.startswith(b"[") and b"/" in frame and int(frame[1 : frame.index(b"/")].strip()) >= runs:
                return seen
    raise AssertionError(f"no progress past {runs} runs: {seen[-2000:]!r}")


def test_ctrl_c_stops_the_sweep_at_once_and_says_what_is_on_disk(smollm2_path: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "app", "calibrate", "--quick", "--model", str(smollm2_path), *THREADS]
    cmd += ["--contexts", "64,160", "--gen-tokens", "48", "--class-prompts", "1"]
    env = {**os.environ, "DYNADRAFT_HOME": str(tmp_path)}
    # A shell's background job ignores SIGINT and its children inherit that (then Python installs no handler):
    # the command gets the default disposition, as a terminal's foreground process has.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        before = _wait_for_progress(proc, 2)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = (before + err).decode("utf-8", "replace")
    tables = list(tmp_path.rglob("tables/*.json"))
    assert proc.returncode == 130, said[-2000:]
    if "no table was written" in said:
        assert tables == [], tables
    else:  # the sweep had ended before it saw the cancel: its table is where the message says
        assert "the table was saved to" in said and tables and str(tables[0]) in said, said[-2000:]
    # The issue asks for 2 s; the bound here leaves room for a loaded 2-core CI machine, and the figure is printed.
    print(f"calibrate exited {elapsed:.2f} s after SIGINT")
    assert elapsed < 5.0, f"calibrate took {elapsed:.1f} s to stop after Ctrl+C"
