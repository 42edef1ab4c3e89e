"""Start/stop the endpoint from the GUI toggle or the CLI: uvicorn in a background thread on a pre-bound socket."""

from __future__ import annotations

import errno
import ipaddress
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI

from app.engine.worker import Engine
from app.server.app import create_app
from app.server.browser_guard import BrowserPolicy
from app.server.metrics import Metrics
from app.server.middleware import DEFAULT_MAX_BODY_BYTES
from app.server.state import DDTableProvider


class EndpointError(RuntimeError):
    """The endpoint cannot start (port in use, unsafe bind, ...); the message is meant for the user."""


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and "localhost"; any other name or address counts as reaching beyond the machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    """Bind and listen now, so "port in use" is a clear error here instead of a log line in a thread."""
    addr = host.strip("[]")
    try:
        infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise EndpointError(f"cannot resolve host {host!r}: {e}") from e
    family, _, _, _, sockaddr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if sys.platform == "win32":
            # Windows' SO_REUSEADDR would let us steal a port another program listens on; forbid sharing instead.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)  # type: ignore[attr-defined]
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart right after stop (TIME_WAIT)
        sock.bind(sockaddr)
        sock.listen(128)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE or getattr(e, "winerror", None) == 10048:
            raise EndpointError(
                f"port {port} on {host} is already in use; choose another port or stop that program"
            ) from e
        raise EndpointError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    sock.setblocking(False)
    return sock


class EndpointServer:
    """The OpenAI-compatible endpoint over one loaded Engine; `start()`/`stop()` may be called repeatedly.

    Binds 127.0.0.1 by default. Any address beyond loopback needs `api_key` (refused otherwise), and with a key every
    request except /health must carry `Authorization: Bearer <key>`. CORS stays off unless `cors_origins` is given.
    """

    def __init__(
        self,
        engine: Engine,
        model_id: str | None = None,
        host: str = "127.0.0.1",
        port: int = 8080,
        api_key: str | None = None,
        cors_origins: Sequence[str] = (),
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        dd_table_provider: DDTableProvider | None = None,
        log_level: str = "warning",
        allowed_hosts: Sequence[str] = (),
        sampling_defaults: dict[str, Any] | None = None,
    ) -> None:
        self.engine = engine
        self.model_id = model_id
        self.host = host
        self.port = port
        self.api_key = api_key or None
        self.cors_origins = tuple(cors_origins)
        self.max_body_bytes = max_body_bytes
        # By default the route serves the table the engine applies (None -> 404 "no_table").
        self.dd_table_provider = dd_table_provider or getattr(engine, "dd_table", None)
        self.log_level = log_level
        self.allowed_hosts = tuple(allowed_hosts)  # Host names served besides localhost (DNS rebinding protection)
        self.sampling_defaults = dict(sampling_defaults or {})  # for requests that leave a field out
        self.metrics = Metrics()  # kept across restarts so the GUI's counters don't reset on a toggle
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._app: FastAPI | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return (
            self._thread is not None and self._thread.is_alive() and self._server is not None and self._server.started
        )

    @property
    def url(self) -> str:
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def request_count(self) -> int:
        """HTTP requests answered since this object was made (any route, any status)."""
        return self.metrics.request_count

    def start(self, timeout: float = 10.0) -> None:
        """Bind and serve in a background thread; raises EndpointError with a user-facing message on failure."""
        with self._lock:
            if self.running:
                return
            if not is_loopback(self.host) and not self.api_key:
                raise EndpointError(
                    f"refusing to listen on {self.host}: binding beyond loopback (127.0.0.1) requires an API key"
                )
            sock = _bind(self.host, self.port)
            self.port = sock.getsockname()[1]  # the real port when 0 asked for any free one
            app = create_app(
                self.engine,
                self.model_id,
                api_key=self.api_key,
                cors_origins=self.cors_origins,
                max_body_bytes=self.max_body_bytes,
                dd_table_provider=self.dd_table_provider,
                metrics=self.metrics,
                browser=BrowserPolicy.for_bind(is_loopback(self.host), self.cors_origins, self.allowed_hosts),
                sampling_defaults=self.sampling_defaults,
            )
            config = uvicorn.Config(
                app,
                log_level=self.log_level,
                access_log=False,
                lifespan="off",
                ws="none",
                timeout_graceful_shutdown=3,  # then in-flight streams are cancelled (and their generations with them)
            )
            server = uvicorn.Server(config)
            thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="dynadraft-http", daemon=True)
            thread.start()
            deadline = time.monotonic() + timeout
            while not server.started:
                if not thread.is_alive() or time.monotonic() > deadline:
                    server.should_exit = True
                    thread.join(timeout)
                    sock.close()
                    raise EndpointError(f"the endpoint did not start on {self.url}")
                time.sleep(0.01)
            self._server, self._thread, self._sock, self._app = server, thread, sock, app

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and release the port (in-flight generations are cancelled after a short grace period)."""
        with self._lock:
            server, thread, sock, app = self._server, self._thread, self._sock, self._app
            self._server = self._thread = self._sock = self._app = None
            if app is not None:
                # End in-flight streams cleanly (final chunk + [DONE]) instead of cutting them at the grace timeout.
                app.state.dynadraft.cancel_all()
            if server is not None:
                server.should_exit = True
            if thread is not None:
                thread.join(timeout)
                if thread.is_alive() and server is not None:
                    server.force_exit = True
                    thread.join(timeout)
            if sock is not None:
                sock.close()

    def __enter__(self) -> EndpointServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
