"""Constants and request builders shared by the server tests."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import openai

MODEL_ID = "smollm2"
MAX_QUEUE = 4  # small, so the concurrency test sees some 429s
MAX_BODY = 256 * 1024  # small, so the oversized-body cases stay quick


def chat_body(content: str = "Say hello.", max_tokens: int = 8, **extra: object) -> dict[str, object]:
    """A valid greedy chat request; tests override single fields to make it malformed."""
    body: dict[str, object] = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    body.update(extra)
    return body


@contextmanager
def dynadraft_serve(*args: str) -> Iterator[tuple[openai.OpenAI, str, str]]:
    """A real `dynadraft serve` subprocess (1 thread, port 0): (openai client, served model name, base URL).
    Stopped with SIGTERM at the end, which must exit 0 (the clean shutdown that flushes what the engine keeps)."""
    cmd = [sys.executable, "-m", "app", "serve", "--port", "0", "--threads", "1", "--ctx-size", "2048", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1) \(model ([^)]+)\)", line)
        assert match, line
        with openai.OpenAI(base_url=match.group(1), api_key="x", max_retries=0, timeout=180) as client:
            yield client, match.group(2), match.group(1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
