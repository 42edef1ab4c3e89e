"""The prompt caches on disk across models: real sessions write them (labelled by model), one total cap removes the
least recently used, and `dynadraft cache` lists and clears them."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from app.engine.cache_usage import folders
from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.paths import get_paths
from app.runtime.sampling import SamplingParams
from tests.journeys.helpers import dynadraft

# About 150 tokens, so each saved state is a few MiB: the cap below is set in whole MiB.
FILLER = "The river bends past the mill, and the mill wheel turns slowly in the brown water. " * 8


def _chat_and_close(model: Path, n_ctx: int, **kw: object) -> None:
    """One short chat on a fresh session, closed: its conversation cache is saved under the app's folder."""
    s = Session(EngineConfig(model=str(model), n_ctx=n_ctx, cache_dir=str(get_paths().prompt_cache), **kw))  # type: ignore[arg-type]
    try:
        req = GenerationRequest(
            messages=({"role": "user", "content": FILLER + f"Say hello in {n_ctx} ways."},),
            max_tokens=4,
            sampling=SamplingParams(temperature=0.0),
        )
        assert [e for e in s.generate(req) if isinstance(e, DoneEvent)]
    finally:
        s.close()


def test_the_total_cap_removes_the_least_recently_used_and_the_cli_lists_and_clears(
    smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DYNADRAFT_HOME", str(tmp_path))
    root = get_paths().prompt_cache
    _chat_and_close(smollm2_path, 512)  # two identities: the context size is part of one
    os.utime(next(root.iterdir()) / "index.json", (1, 1))  # the older one, whatever the clock's resolution
    _chat_and_close(smollm2_path, 1024)
    both = folders(root)
    assert len(both) == 2 and all(f.label == smollm2_path.name and f.states >= 1 for f in both)
    newest, oldest = both
    # A third identity under a cap that holds two folders and a half: the least recently used goes, the new one stays.
    cap_mib = math.ceil(2.5 * max(newest.size, oldest.size) / (1024 * 1024))
    _chat_and_close(smollm2_path, 768, cache_disk_total_mib=cap_mib)
    left = {f.path for f in folders(root)}
    assert oldest.path not in left and newest.path in left and len(left) == 2

    env = {"DYNADRAFT_HOME": str(tmp_path)}
    listed = dynadraft("cache", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    caches = json.loads(listed.stdout)["caches"]
    assert {c["folder"] for c in caches} == {str(p) for p in left} and all(c["bytes"] > 0 for c in caches)
    text = dynadraft("cache", env=env).stdout
    assert ": 2 (one per model and settings)" in text and smollm2_path.name in text

    assert json.loads(dynadraft("cache", "--clear", "no-such-model", "--json", env=env).stdout)["removed"] == []
    cleared = json.loads(dynadraft("cache", "--clear", smollm2_path.stem[:8], "--json", env=env).stdout)
    assert len(cleared["removed"]) == 2 and cleared["caches"] == [] and not any(root.iterdir())
