"""Engine fixtures: sessions on the real small model, and a re-quantised draft of it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from tests.engine.tiny_gguf import write_tiny_mamba, write_tiny_qwen35


@pytest.fixture(scope="module")
def small_session(smollm2_path: Path, smollm2_q2k_path: Path) -> Iterator[Session]:
    s = Session(EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=2048, n_batch=256))
    yield s
    s.close()


@dataclass(frozen=True)
class TinyModel:
    name: str
    path: Path
    prompt: str  # greedy decoding of it loops after a few tokens: lookup drafts are rejected, then accepted


# Seeds chosen so that greedy decoding of the prompt falls into a loop after a few tokens (lookup drafts are rejected
# before the loop and accepted inside it: several rollbacks per request), while the memory weighs enough that losing
# it changes the tokens (see the broken-rollback test). out_std 2.0: logits several units apart, so a wrong token is
# not excused as a near-tie.
_WRITERS = {
    "mamba": lambda path: write_tiny_mamba(path, seed=3, mix=0.7, out_std=2.0),
    "qwen35": lambda path: write_tiny_qwen35(path, seed=9, mix=0.3, out_std=2.0),
}


@pytest.fixture(scope="session", params=sorted(_WRITERS))
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> TinyModel:
    name = request.param
    path = _WRITERS[name](tmp_path_factory.mktemp(f"tiny-{name}") / f"tiny-{name}.gguf")
    return TinyModel(name, path, "hello world hello world")
