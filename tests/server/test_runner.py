"""Start/stop, port handling, API keys, CORS, the DD table route and engine failures (never a dead server)."""

from __future__ import annotations

import argparse
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from app.engine.config import EngineConfig
from app.engine.runtime import ModelMeta
from app.engine.types import EngineError, GenerationRequest
from app.engine.worker import Engine, EventSink, RequestHandle
from app.server.cli import run_serve
from app.server.runner import EndpointError, EndpointServer, is_loopback
from tests.server.helpers import MODEL_ID, chat_body


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("127.1.2.3")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("192.168.1.5")
    assert not is_loopback("example.com")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5"])
def test_beyond_loopback_without_key_is_refused(engine: Engine, host: str) -> None:
    srv = EndpointServer(engine, MODEL_ID, host=host, port=0)
    with pytest.raises(EndpointError, match="requires an API key"):
        srv.start()
    assert not srv.running


def test_port_in_use_is_a_clear_error(engine: Engine) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        srv = EndpointServer(engine, MODEL_ID, port=port)
        with pytest.raises(EndpointError, match="already in use"):
            srv.start()
        assert not srv.running
    finally:
        blocker.close()


def test_start_stop_restart_releases_port(engine: Engine) -> None:
    srv = EndpointServer(engine, MODEL_ID, port=0)
    srv.start()
    port = srv.port
    assert srv.running and srv.url == f"http://127.0.0.1:{port}"
    assert httpx.get(f"{srv.url}/health").status_code == 200
    srv.stop()
    assert not srv.running
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    probe.bind(("127.0.0.1", port))  # released: binding again works
    probe.close()
    srv.start()  # the same object starts again on the same port
    try:
        assert srv.port == port and httpx.get(f"{srv.url}/health").status_code == 200
        assert srv.request_count >= 2
    finally:
        srv.stop()


def test_api_key_required(engine: Engine) -> None:
    with EndpointServer(engine, MODEL_ID, port=0, api_key="s3cret") as srv:
        r = httpx.post(f"{srv.url}/v1/chat/completions", json=chat_body())
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "authentication_error"
        assert r.headers["www-authenticate"] == "Bearer"
        bad = httpx.get(f"{srv.url}/v1/models", headers={"Authorization": "Bearer wrong"})
        assert bad.status_code == 401
        assert httpx.get(f"{srv.url}/metrics").status_code == 401
        # /props names the model's file (a local path): unlike llama-server's, it needs the key too
        assert httpx.get(f"{srv.url}/props").status_code == 401
        assert httpx.get(f"{srv.url}/health").status_code == 200  # status polling stays open
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{srv.url}/v1", api_key="nope", max_retries=0).models.list()
        good = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="s3cret", max_retries=0)
        resp = good.chat.completions.create(
            model=MODEL_ID, messages=[{"role": "user", "content": "Hi"}], max_tokens=2, temperature=0
        )
        assert resp.choices[0].message.content is not None


def test_cors_off_by_default_and_on_when_configured(engine: Engine, base_url: str) -> None:
    origin = {"Origin": "http://localhost:3000"}
    assert "access-control-allow-origin" not in httpx.get(f"{base_url}/v1/models", headers=origin).headers
    with EndpointServer(engine, MODEL_ID, port=0, cors_origins=["http://localhost:3000"], api_key="k") as srv:
        pre = httpx.options(
            f"{srv.url}/v1/chat/completions",
            headers={
                **origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == "http://localhost:3000"
        r = httpx.get(f"{srv.url}/v1/models", headers={**origin, "Authorization": "Bearer k"})
        assert r.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_dd_table_provider(engine: Engine) -> None:
    table: dict[str, Any] = {"rows": [{"ctx": [0, 512], "setting": {"source": "lookup", "n_max": 4}}]}
    current: list[dict[str, Any] | None] = [table]
    with EndpointServer(engine, MODEL_ID, port=0, dd_table_provider=lambda: current[0]) as srv:
        assert httpx.get(f"{srv.url}/v1/dynamic-draft/table").json() == table
        current[0] = None
        r = httpx.get(f"{srv.url}/v1/dynamic-draft/table")
        assert r.status_code == 404 and r.json()["error"]["code"] == "no_table"
        assert httpx.post(f"{srv.url}/v1/dynamic-draft/table", json={}).status_code == 405  # read-only


class _FailingEngine:
    """Duck-types Engine: accepts jobs, then fails them the way a broken generation does (handle.error + end)."""

    def __init__(self, config: EngineConfig, error: EngineError) -> None:
        self.config = config
        self.max_queue = 4
        self.queue_depth = 0
        self.error = error
        self.model_meta = ModelMeta(n_ctx=config.n_ctx)

    def draft_sources(self) -> frozenset[str]:
        return frozenset({"lookup"})

    def submit(self, request: GenerationRequest, sink: EventSink | None = None) -> RequestHandle:
        handle = RequestHandle(request, sink)
        handle.finish(self.error)
        return handle


def test_engine_failure_is_500_and_server_survives(smollm2_path: Any) -> None:
    fake = _FailingEngine(EngineConfig(model=str(smollm2_path)), EngineError("internal error: boom"))
    with EndpointServer(fake, MODEL_ID, port=0) as srv:  # type: ignore[arg-type]
        for stream in (False, True):
            r = httpx.post(f"{srv.url}/v1/chat/completions", json=chat_body(stream=stream))
            assert r.status_code == 500
            err = r.json()["error"]
            assert err["type"] == "server_error" and "boom" in err["message"]
            assert "Traceback" not in r.text
        assert httpx.get(f"{srv.url}/health").status_code == 200


def _serve_args(**kw: Any) -> argparse.Namespace:
    base: dict[str, Any] = {"model": "", "draft": None, "host": "127.0.0.1", "port": 0, "api_key": None}
    base.update(kw)
    return argparse.Namespace(**base)


def test_cli_refuses_unsafe_bind_and_missing_model(capsys: pytest.CaptureFixture[str], smollm2_path: Any) -> None:
    assert run_serve(_serve_args(model=str(smollm2_path), host="0.0.0.0")) == 2
    assert "requires --api-key" in capsys.readouterr().err
    assert run_serve(_serve_args(model="/no/such/model.gguf")) == 2
    assert "model not found" in capsys.readouterr().err


def test_cli_serves_until_sigterm(smollm2_path: Any) -> None:
    code = (
        "import argparse, sys; from app.server.cli import run_serve; "
        f"sys.exit(run_serve(argparse.Namespace(model={str(smollm2_path)!r}, draft=None, host='127.0.0.1', port=0, "
        "api_key=None, threads=1)))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/v1", line)
        assert match, line
        models = httpx.get(f"{match.group(1)}/v1/models", timeout=30).json()
        assert models["data"][0]["id"] == Path(smollm2_path).stem
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
