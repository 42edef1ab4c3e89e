"""Drive the real `dynadraft` command: one-shot subcommands, and `serve` as a subprocess reached over HTTP."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# One thread for the engine: the test machine's cores are shared; what the journeys check does not depend on it.
THREADS = ("--threads", "1")


def dynadraft(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `dynadraft ARGS` (as `python -m app`, the same entry point) and return the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def generate_json(*args: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """`dynadraft generate ... --json`: (the parsed object, stderr); fails the test when it does not exit 0."""
    p = dynadraft("generate", *args, "--json", env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout), p.stderr


@contextmanager
def served(*args: str, timeout: float = 180, env: dict[str, str] | None = None) -> Iterator[tuple[str, list[str]]]:
    """`dynadraft serve ARGS --port 0` in the background; yields (base URL ending in /v1, its output lines so far)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    lines: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            m = re.search(r"dynadraft serve: (http://\S+/v1)", line)
            if m and not url:
                url.append(m.group(1))
            if url and "dynadraft serve: Dynamic Draft:" in line:  # printed right after the URL: ready
                found.set()
        found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        found.wait(timeout)
        assert url, "serve did not start:\n" + "\n".join(lines[-40:])
        yield url[0], lines
    finally:
        stop(proc)
        reader.join(5)


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 30 s."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
