"""`dynadraft serve --model NAME`: a model of the models folder by name, served under its file name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.helpers import dynadraft_serve


def test_serve_takes_a_local_models_name_and_refuses_an_unknown_one(
    smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / "my-model.gguf").symlink_to(smollm2_path)
    monkeypatch.setenv("DYNADRAFT_HOME", str(tmp_path))
    with dynadraft_serve("--model", "my-model") as (client, model, _):
        assert model == "my-model"
        r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
        assert r.choices[0].message.content
    cmd = [sys.executable, "-m", "app", "serve", "--model", "nothing-like-it", "--port", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no model here has it in its name; models here: " in p.stderr, p.stderr
    assert "my-model.gguf" in p.stderr and "Traceback" not in p.stderr
