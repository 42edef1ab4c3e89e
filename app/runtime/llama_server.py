"""An external (fork) `llama-server` driven as a managed subprocess on loopback: validate, start, health, logs, stop."""

from __future__ import annotations

import atexit
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.paths import get_paths
from app.runtime.child_process import popen_tied
from app.runtime.threads import resolve_threads

HOST = "127.0.0.1"  # never beyond loopback: the fork's server has no API key set by us

# Per-request fields DynaDraft may send, by what they control. A build honours a field when its /props
# `default_generation_settings.params` lists it: that object is the server's own record of the per-request
# parameters a slot carries, so a field missing there is one this build ignores (or never had).
SPECULATIVE_FIELDS = ("speculative.n_max", "speculative.n_min", "speculative.p_min")
SAMPLING_FIELDS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "repeat_last_n",
    "seed",
    "typical_p",
    "top_n_sigma",
    "xtc_probability",
    "xtc_threshold",
    "dynatemp_range",
    "dynatemp_exponent",
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_penalty_last_n",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "min_keep",
)
_KEEP_LOGS = 10  # newest server logs kept in the logs folder


class ExternalServerError(RuntimeError):
    """The external llama-server could not be validated, started or reached; the message says what to fix."""


class ServerHTTPError(ExternalServerError):
    """A non-2xx answer: the HTTP status and llama.cpp's error `type` and `message`."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(f"llama-server answered {status} ({error_type}): {message}")
        self.status = status
        self.error_type = error_type
        self.server_message = message


@dataclass(frozen=True)
class ServerSpec:
    """How to start one llama-server: binary, model(s), context, threads, offload and start-time draft settings.

    The draft settings become command-line flags: they are what a build that ignores per-request
    `speculative.*` fields runs for every request.
    """

    binary: str
    model: str
    draft: str | None = None
    n_ctx: int = 4096
    n_batch: int = 512
    n_threads: int = 0  # 0: one per physical core, as the engine's
    n_gpu_layers: int = 0  # -1: all
    draft_n_gpu_layers: int | None = None  # None: same as the target
    flash_attn: str = "auto"  # "auto" | "on" | "off"
    type_k: str = "f16"
    type_v: str = "f16"
    draft_n_max: int = 16
    draft_n_min: int = 0
    draft_p_min: float = 0.75
    extra_args: tuple[str, ...] = ()
    start_timeout_s: float = 180.0
    chat_template: str | None = None  # a Jinja template instead of the GGUF's: written to a file for the server


@dataclass(frozen=True)
class ServerFeatures:
    """What one running build reports in /props and which of DynaDraft's per-request fields it honours."""

    build_info: str
    n_ctx: int  # one slot's context window (what a request may fill)
    bos_token: str
    eos_token: str
    chat_template: str
    honoured: tuple[str, ...]  # among SPECULATIVE_FIELDS + SAMPLING_FIELDS, in that order
    ignored: tuple[str, ...]  # the rest of them: sent values would have no effect, so they are not sent

    @property
    def speculative(self) -> tuple[str, ...]:
        """The per-request draft fields this build applies (empty: only its start-time draft flags apply)."""
        return tuple(f for f in self.honoured if f in SPECULATIVE_FIELDS)

    def describe(self) -> str:
        spec = ", ".join(self.speculative) or "none of speculative.n_max/n_min/p_min"
        line = f"{self.build_info}: honours {spec} per request"
        return line + (f"; ignores {', '.join(self.ignored)}" if self.ignored else "")

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> ServerFeatures:
        settings = props.get("default_generation_settings") or {}
        params = settings.get("params") or {}
        known = SPECULATIVE_FIELDS + SAMPLING_FIELDS
        return cls(
            build_info=str(props.get("build_info") or "unknown build"),
            n_ctx=int(settings.get("n_ctx") or 0),
            bos_token=str(props.get("bos_token") or ""),
            eos_token=str(props.get("eos_token") or ""),
            chat_template=str(props.get("chat_template") or ""),
            honoured=tuple(f for f in known if f in params),
            ignored=tuple(f for f in known if f not in params),
        )


@dataclass(frozen=True)
class CliDialect:
    """Flag spellings of one build, read from its --help (llama.cpp renamed the draft flags; forks lag behind)."""

    draft_n_max: str
    draft_n_min: str
    draft_p_min: str
    flash_attn_value: bool  # `-fa on|off|auto` (newer) rather than a bare `-fa` switch
    # Newer builds load -md but draft with it only when `--spec-type draft-simple` is given; older ones always do.
    spec_type_draft: str | None
    has: frozenset[str] = field(default_factory=frozenset)  # optional switches the build knows

    @classmethod
    def from_help(cls, text: str) -> CliDialect:
        new = "--spec-draft-n-max" in text
        switches = ("--no-webui", "--jinja", "--no-warmup", "--chat-template-file")
        return cls(
            draft_n_max="--spec-draft-n-max" if new else "--draft-max",
            draft_n_min="--spec-draft-n-min" if new else "--draft-min",
            draft_p_min="--spec-draft-p-min" if new else "--draft-p-min",
            flash_attn_value="[on|off|auto]" in text or "'on', 'off', or 'auto'" in text,
            spec_type_draft="draft-simple" if "--spec-type" in text and "draft-simple" in text else None,
            has=frozenset(s for s in switches if s in text),
        )


def resolve_binary(binary: str) -> Path:
    """The executable to run: a path, or a name on PATH; raises with what is wrong."""
    if os.sep not in binary and not Path(binary).exists():
        found = shutil.which(binary)
        if found is None:
            raise ExternalServerError(f"llama-server binary {binary!r} not found on PATH")
        return Path(found)
    path = Path(binary).expanduser()
    if not path.exists():
        raise ExternalServerError(f"llama-server binary not found: {path}")
    if not path.is_file():
        raise ExternalServerError(f"llama-server binary is not a file: {path}")
    if not os.access(path, os.X_OK):
        raise ExternalServerError(f"llama-server binary is not executable: {path} (chmod +x it)")
    return path


def probe_cli(binary: Path, timeout_s: float = 30.0) -> CliDialect:
    """Run `binary --help` (no model is loaded) to check it is a llama-server and learn its flag spellings."""
    try:
        out = subprocess.run(
            [str(binary), "--help"], capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise ExternalServerError(f"could not run {binary} --help: {e}") from e
    text = out.stdout + out.stderr
    if out.returncode != 0 or "--port" not in text or "--model" not in text:
        tail = "\n".join(text.strip().splitlines()[-5:])
        raise ExternalServerError(
            f"{binary} does not look like a llama-server (--help exited {out.returncode}"
            f"{', no --port/--model flags' if out.returncode == 0 else ''}): {tail}"
        )
    return CliDialect.from_help(text)


_PORT_ATTEMPTS = 4
_BIND_FAILED = re.compile(r"couldn't bind|address already in use|failed to bind", re.IGNORECASE)


def port_taken(log_tail: str) -> bool:
    """Whether a failed start's log says the port was taken (then another port is tried)."""
    return bool(_BIND_FAILED.search(log_tail))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


_running: weakref.WeakSet[ExternalServer] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    # An engine thread may still own a server when the interpreter exits; never leave it running.
    for server in list(_running):
        server.stop()


def _log_folder() -> Path:
    folder = get_paths().logs / "llama-server"
    folder.mkdir(parents=True, exist_ok=True)
    in_use = {s.log_path for s in _running}  # a running server's log stays, however many servers ran since
    logs = sorted((p for p in folder.glob("*.log") if p not in in_use), key=lambda p: p.stat().st_mtime)
    for old in logs[:-_KEEP_LOGS]:
        old.unlink(missing_ok=True)
        old.with_suffix(".jinja").unlink(missing_ok=True)  # the chat template that server was given, if any
    return folder


class ExternalServer:
    """One llama-server subprocess on 127.0.0.1:<free port>. `start()` validates first, then waits for /health."""

    def __init__(self, spec: ServerSpec, log_path: Path | None = None) -> None:
        self.spec = spec
        self.port = 0
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.features: ServerFeatures | None = None
        self.dialect: CliDialect | None = None
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def validate(self) -> Path:
        """Check the binary and the model files before anything starts; returns the binary's path."""
        binary = resolve_binary(self.spec.binary)
        for label, path in (("model", self.spec.model), ("draft model", self.spec.draft)):
            if path is not None and not Path(path).is_file():
                raise ExternalServerError(f"{label} not found: {path}")
        self.dialect = probe_cli(binary)
        if self.spec.chat_template and "--chat-template-file" not in self.dialect.has:
            # Said, not dropped: the server would otherwise apply the GGUF's template to every request.
            raise ExternalServerError(
                f"{binary.name} has no --chat-template-file option, so it cannot use the chat template given; "
                "leave the template out, or use a newer llama-server"
            )
        return binary

    def command(self, binary: Path, port: int) -> list[str]:
        """The full command line for this spec and build."""
        s, d = self.spec, self.dialect
        assert d is not None
        threads = resolve_threads(s.n_threads)
        ngl = 999 if s.n_gpu_layers < 0 else s.n_gpu_layers  # 999: "all" in every build's spelling
        # One slot, so a request may use the whole context (newer builds split -c across 4 slots by default).
        cmd = [str(binary), "--host", HOST, "--port", str(port), "-m", s.model, "-c", str(s.n_ctx), "-np", "1"]
        cmd += ["-b", str(s.n_batch), "-ub", str(s.n_batch), "-t", str(threads), "-tb", str(threads)]
        cmd += ["-ngl", str(ngl), "-ctk", s.type_k, "-ctv", s.type_v]
        if d.flash_attn_value:
            cmd += ["-fa", s.flash_attn]
        elif s.flash_attn == "on":  # an older build: flash attention is a bare switch and off by default
            cmd += ["-fa"]
        if s.draft:
            dl = s.n_gpu_layers if s.draft_n_gpu_layers is None else s.draft_n_gpu_layers
            cmd += ["-md", s.draft, "-ngld", str(999 if dl < 0 else dl)]
            if d.spec_type_draft:
                cmd += ["--spec-type", d.spec_type_draft]
            cmd += [d.draft_n_max, str(s.draft_n_max), d.draft_n_min, str(s.draft_n_min)]
            cmd += [d.draft_p_min, f"{s.draft_p_min:g}"]
        cmd += [f for f in ("--no-webui", "--jinja", "--no-warmup") if f in d.has]
        template = self.template_file()
        if template is not None:  # after --jinja: older builds accept only known templates without it
            cmd += ["--chat-template-file", str(template)]
        return cmd + list(s.extra_args)

    def template_file(self) -> Path | None:
        """Where the spec's chat template is written for the server to read: beside its log (None: no template)."""
        return self.log_path.with_suffix(".jinja") if self.spec.chat_template and self.log_path else None

    def start(self) -> ExternalServer:
        """Validate, spawn, and wait until /health answers 200; raises ExternalServerError with the log's tail.

        The free port is only free when we looked: if another program takes it first, llama-server cannot bind,
        and the start is retried on a fresh port.
        """
        fixed_log = self.log_path is not None
        for attempt in range(_PORT_ATTEMPTS):
            try:
                return self._start_once()
            except ExternalServerError:
                if attempt + 1 == _PORT_ATTEMPTS or not port_taken(self.logs(20)):
                    raise
                if not fixed_log:
                    self.log_path = None  # a fresh log named after the new port
        raise AssertionError("unreachable")

    def _start_once(self) -> ExternalServer:
        with self._lock:
            if self.running:
                return self
            binary = self.validate()
            self.port = free_port()
            if self.log_path is None:
                self.log_path = _log_folder() / f"{Path(self.spec.model).stem}-{self.port}.log"
            cmd = self.command(binary, self.port)
            template = self.template_file()
            if template is not None and self.spec.chat_template:
                template.write_text(self.spec.chat_template, encoding="utf-8")
            with open(self.log_path, "wb") as log:
                log.write(("$ " + " ".join(cmd) + "\n").encode())
                log.flush()
                try:
                    # Tied to our life: a DynaDraft killed with SIGKILL must not leave a server running.
                    self.proc = popen_tied(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
                except OSError as e:
                    raise ExternalServerError(f"could not start {binary}: {e}") from e
            _running.add(self)
        try:
            self._wait_healthy()
            self.features = ServerFeatures.from_props(self.props())
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.spec.start_timeout_s
        while True:
            assert self.proc is not None
            code = self.proc.poll()
            if code is not None:
                raise ExternalServerError(
                    f"llama-server exited with code {code} while starting; its log ({self.log_path}) ends with:\n"
                    + self.logs(20)
                )
            try:
                status, _ = self.request("GET", "/health", timeout=2.0)
                if status == 200:
                    return
            except (OSError, http.client.HTTPException, ServerHTTPError):
                pass  # not listening yet, or 503 while the model loads
            if time.monotonic() > deadline:
                raise ExternalServerError(
                    f"llama-server did not become healthy within {self.spec.start_timeout_s:.0f} s; its log "
                    f"({self.log_path}) ends with:\n" + self.logs(20)
                )
            time.sleep(0.1)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, wait, then SIGKILL; always reaps the process so no zombie is left."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _running.discard(self)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def __enter__(self) -> ExternalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- reading --------------------------------------------------------------------------------------------------
    def logs(self, tail: int | None = 200) -> str:
        """The server's combined stdout/stderr (the last `tail` lines; None: all)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines if tail is None else lines[-tail:])

    def props(self) -> dict[str, Any]:
        _, body = self.request("GET", "/props")
        return body

    def honoured_fields(self) -> tuple[str, ...]:
        """The per-request fields (draft and sampling) this build applies, from its /props."""
        return ServerFeatures.from_props(self.props()).honoured

    # -- HTTP -----------------------------------------------------------------------------------------------------
    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if not self.port:
            raise ExternalServerError("llama-server is not started")
        return http.client.HTTPConnection(HOST, self.port, timeout=timeout)

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float | None = 60.0
    ) -> tuple[int, dict[str, Any]]:
        """One JSON request; raises ServerHTTPError with llama.cpp's error type and message on a non-2xx answer."""
        conn = self._connection(timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        payload = _json_or_text(raw)
        if resp.status >= 300:
            raise _http_error(resp.status, payload)
        return resp.status, payload

    def stream(self, path: str, body: dict[str, Any], timeout: float | None = None) -> ServerStream:
        """POST a streaming request; iterate the returned ServerStream for its SSE events, close() it to cancel."""
        conn = self._connection(timeout)
        try:
            conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        if resp.status >= 300:
            raw = resp.read()
            conn.close()
            raise _http_error(resp.status, _json_or_text(raw))
        return ServerStream(conn, resp)


class ServerStream:
    """Server-sent events of one streaming response; closing the connection is how llama-server learns of a cancel."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self._resp = resp

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            line = self._resp.readline()
            if not line:
                return
            text = line.decode("utf-8", "replace").strip()
            if text.startswith("data: "):
                data = text[6:]
                if data == "[DONE]":
                    return
                yield json.loads(data)
            elif text.startswith("error: "):
                raise _http_error(500, json.loads(text[7:]))
            # blank separators and ":" pings carry nothing

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ServerStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _json_or_text(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {"message": raw.decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"value": value}


def _http_error(status: int, payload: dict[str, Any]) -> ServerHTTPError:
    err = payload.get("error", payload)
    if not isinstance(err, dict):
        err = {"message": str(err)}
    return ServerHTTPError(int(err.get("code") or status), str(err.get("type") or "error"), str(err.get("message", "")))
