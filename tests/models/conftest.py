"""Fixtures for app.models tests: isolated data folders, a local Hub, the SmolLM2 model and its IQ3_S build."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.models.models_testlib import FakeHub, serve_fake_hub


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Never touch real user folders or a real Hub login."""
    home = tmp_path / "dynadraft-home"
    monkeypatch.setenv("DYNADRAFT_HOME", str(home))
    for var in ("HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    """A Hub on 127.0.0.1 whose LFS redirects go to 'localhost' (another host, like a CDN)."""
    with serve_fake_hub() as state:
        yield state


@pytest.fixture(scope="session")
def smollm2() -> Path:
    from app.models.packaged import ensure_model

    return ensure_model("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2_iq3s(smollm2: Path) -> Path:
    """SmolLM2 re-quantized to IQ3_S by the bundled llama.cpp, cached outside the test's tmp folders."""
    import ctypes

    import llama_cpp

    from app.models.packaged import cache_dir

    out = cache_dir() / "SmolLM2-135M-Instruct.IQ3_S.test.gguf"
    if out.is_file() and out.stat().st_size > 0:
        return out
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_IQ3_S
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 2
    rc = llama_cpp.llama_model_quantize(str(smollm2).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"llama_model_quantize returned {rc}")
    os.replace(tmp, out)
    return out
