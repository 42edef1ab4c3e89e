"""Server fixtures: one real Engine on SmolLM2-135M and one real endpoint on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.engine.config import EngineConfig
from app.engine.worker import Engine
from app.server.runner import EndpointServer
from tests.server.helpers import MAX_BODY, MAX_QUEUE, MODEL_ID


@pytest.fixture(scope="session")
def engine(smollm2_path: Path) -> Iterator[Engine]:
    # One thread: on a small shared machine llama.cpp's spinning worker threads oversubscribe the cores (measured
    # 25 tok/s with 1 thread vs 7 tok/s with 2 while other jobs ran); the server logic under test is unaffected.
    config = EngineConfig(model=str(smollm2_path), n_ctx=2048, n_threads=1)
    eng = Engine(config, max_queue=MAX_QUEUE).wait_ready(120)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def server(engine: Engine) -> Iterator[EndpointServer]:
    srv = EndpointServer(engine, MODEL_ID, port=0, max_body_bytes=MAX_BODY)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def base_url(server: EndpointServer) -> str:
    return server.url


@pytest.fixture
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        yield client
