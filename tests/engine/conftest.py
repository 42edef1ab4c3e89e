"""Engine fixtures: sessions on the real small model, and a re-quantised draft of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.session import EngineConfig, Session


@pytest.fixture(scope="session")
def smollm2_q2k_path(smollm2_path: Path) -> Path:
    """SmolLM2 re-quantised to Q2_K by llama.cpp: a real, imperfect draft sharing the target's tokenizer."""
    from app.models.packaged import ensure_quantized

    return ensure_quantized("smollm2-135m", "Q2_K")


@pytest.fixture(scope="module")
def small_session(smollm2_path: Path, smollm2_q2k_path: Path) -> Iterator[Session]:
    s = Session(EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=2048, n_batch=256))
    yield s
    s.close()
