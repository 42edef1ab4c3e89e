"""Journey fixtures: the SmolLM2 pair, calibrated once with `dynadraft calibrate` into a home the journeys share."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.journeys.helpers import THREADS, dynadraft

# A tiny budget: one short prompt length and 8 tokens per run, so the whole sweep takes seconds.
TINY = ("--contexts", "64", "--gen-tokens", "8", "--class-prompts", "1")


@dataclass(frozen=True)
class Calibrated:
    """A pair calibrated through the CLI: its flags, the DYNADRAFT_HOME holding the table, and `--json`'s output."""

    pair: tuple[str, ...]
    env: dict[str, str]
    home: Path
    result: dict[str, Any]

    @property
    def table_id(self) -> str:
        return str(self.result["table"]["table_id"])


@pytest.fixture(scope="session")
def calibrated(smollm2_path: Path, smollm2_q2k_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Calibrated:
    home = tmp_path_factory.mktemp("journey-home")
    env = {"DYNADRAFT_HOME": str(home)}
    pair = ("--model", str(smollm2_path), "--draft", str(smollm2_q2k_path))
    p = dynadraft("calibrate", *pair, "--quick", *TINY, *THREADS, "--json", env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return Calibrated(pair, env, home, json.loads(p.stdout))
