"""`--cost-stop` on the command line: `dynadraft generate` asks for it per run, `dynadraft serve` for its default."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.models.packaged import ensure_quantized
from tests.server.helpers import dynadraft_serve


def test_generate_with_the_cost_stop(smollm2_path: Path) -> None:
    cmd = [sys.executable, "-m", "app", "generate", "--model", str(smollm2_path), "--lookup", "--cost-stop"]
    cmd += ["--prompt", "Repeat: one two three one two three", "--max-tokens", "12", "--temperature", "0", "--json"]
    proc = subprocess.run([*cmd, "--ctx-size", "512", "--threads", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["speculative"]["cost_stop"] is True and out["speculative"]["source"] == "lookup"
    assert out["dynamic_draft"]["reason"] == "override"
    assert out["dynamic_draft"]["selected_label"] == "lookup n8,p0,cost"


def test_serve_defaults_to_the_cost_stop_and_a_server_binary_refuses_it(smollm2_path: Path) -> None:
    draft = ensure_quantized("smollm2-135m", "Q2_K")
    with dynadraft_serve("--model", str(smollm2_path), "--draft", str(draft), "--cost-stop") as (client, name, _):
        resp = client.chat.completions.create(
            model=name, messages=[{"role": "user", "content": "Say hi."}], max_tokens=8, temperature=0
        )
        dd = (resp.model_extra or {})["dynamic_draft"]
        # No calibration table: the configured default runs, llama.cpp's n16 with the cost stop for its p_min 0.75.
        assert dd["reason"] == "no_table" and dd["selected_label"] == "n16,p0,cost"
    cmd = [sys.executable, "-m", "app", "serve", "--model", str(smollm2_path), "--cost-stop"]
    proc = subprocess.run([*cmd, "--server-binary", "/no/such/llama-server"], capture_output=True, text=True)
    assert proc.returncode == 2 and "the cost stop needs the bundled runtime" in proc.stderr
