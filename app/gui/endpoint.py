"""The endpoint panel: a switch that starts/stops the local OpenAI-compatible server, with URL, key and live count."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.gui.bridge import BackgroundCall
from app.server.anthropic_messages import claude_environment
from app.server.runner import EndpointServer, is_loopback

if TYPE_CHECKING:  # the engine (and llama.cpp) is imported only where a model is loaded
    from app.engine.worker import Engine


SWITCH_STYLE = """
QCheckBox#switch { font-weight: bold; spacing: 10px; }
QCheckBox#switch::indicator { width: 38px; height: 20px; border-radius: 10px; background: #bbb; }
QCheckBox#switch::indicator:checked { background: #2ea043; }
QCheckBox#switch::indicator:disabled { background: #ddd; }
"""


class EndpointPanel(QWidget):
    """Serve the loaded model over an OpenAI-compatible HTTP API from inside the app."""

    state_changed = Signal(bool)  # running
    error = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.engine: Engine | None = None
        self.model_id = "dynadraft"
        self.server: Any = None
        self._call: BackgroundCall | None = None

        intro = self._build_intro()
        self._build_switch()
        key_row = self._build_server_fields()
        url_row = self._build_url_row()
        claude_row = self._build_claude_env_row()
        self._build_status_labels()
        form = self._build_form(key_row, url_row, claude_row)
        self._build_layout(intro, form)

        self.timer = QTimer(self)
        self.timer.setInterval(500)
        self.timer.timeout.connect(self._poll)
        self._sync()

    # -- building ---------------------------------------------------------------------------------------------------
    def _build_intro(self) -> QLabel:
        intro = QLabel(
            "Serve the loaded model to other apps (editors, agents, scripts) through an OpenAI-compatible API, "
            "and Anthropic's Messages API for Claude clients (Claude Code, the anthropic SDK) on the same port. "
            "Requests share the engine with this window and are served one at a time."
        )
        intro.setWordWrap(True)
        return intro

    def _build_switch(self) -> None:
        """The on/off switch and the state beside it."""
        self.switch = QCheckBox("Local endpoint")
        self.switch.setObjectName("switch")
        self.switch.setStyleSheet(SWITCH_STYLE)
        self.switch.toggled.connect(self._toggled)
        self.state = QLabel("Off")

    def _build_server_fields(self) -> QHBoxLayout:
        """Bind address, port, API key and allowed host names (the fields `settings` keeps); returns the key's row."""
        self.host = QComboBox()
        self.host.setEditable(True)
        self.host.addItems(["127.0.0.1", "0.0.0.0"])
        self.host.setToolTip("127.0.0.1: this computer only. 0.0.0.0: reachable from your network (needs an API key)")
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(8080)
        self.api_key = QLineEdit()
        self.api_key.setPlaceholderText("none (only allowed on 127.0.0.1)")
        self.api_key.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        gen = QPushButton("Generate")
        gen.setToolTip("Create a random API key")
        gen.clicked.connect(lambda: self.api_key.setText("dd-" + secrets.token_urlsafe(24)))
        key_row = QHBoxLayout()
        key_row.addWidget(self.api_key, 1)
        key_row.addWidget(gen)
        self.allowed_hosts = QLineEdit()
        self.allowed_hosts.setPlaceholderText("none: only localhost names (e.g. mybox.lan, *.internal)")
        self.allowed_hosts.setToolTip(
            "Host names clients may use besides localhost/127.0.0.1, comma-separated. Other names are refused "
            "(403) so a web page cannot reach the endpoint through DNS rebinding."
        )
        return key_row

    def _build_url_row(self) -> QHBoxLayout:
        """The base URL (filled in once serving) and its Copy button."""
        self.url = QLineEdit()
        self.url.setReadOnly(True)
        self.url.setPlaceholderText("starts when the switch is on")
        self.copy_btn = QPushButton("Copy")
        self.copy_btn.setToolTip("Copy the base URL")
        self.copy_btn.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.url.text()))
        url_row = QHBoxLayout()
        url_row.addWidget(self.url, 1)
        url_row.addWidget(self.copy_btn)
        return url_row

    def _build_claude_env_row(self) -> QHBoxLayout:
        """The environment for Claude clients (filled in once serving) and its Copy button."""
        # Claude clients take the server's root (they add /v1/messages) and the served model's name from these.
        self.claude_env = QLineEdit()
        self.claude_env.setReadOnly(True)
        self.claude_env.setPlaceholderText("starts when the switch is on")
        self.claude_env.setToolTip(
            "Environment for Claude Code (or any Anthropic SDK client): put it before the command, e.g. "
            "ANTHROPIC_BASE_URL=... claude"
        )
        copy_env = QPushButton("Copy")
        copy_env.setObjectName("copy_claude_env")
        copy_env.setToolTip("Copy the environment for Claude clients")
        self._claude_env = ""  # with the whole key; the field shows it shortened, as the curl example does
        copy_env.clicked.connect(lambda: QGuiApplication.clipboard().setText(self._claude_env))
        claude_row = QHBoxLayout()
        claude_row.addWidget(self.claude_env, 1)
        claude_row.addWidget(copy_env)
        return claude_row

    def _build_status_labels(self) -> None:
        """The count of requests served and the error line."""
        self.requests = QLabel("0")
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #b00020;")

    def _build_form(self, key_row: QHBoxLayout, url_row: QHBoxLayout, claude_row: QHBoxLayout) -> QFormLayout:
        form = QFormLayout()
        form.addRow(self.switch, self.state)
        form.addRow("Bind address", self.host)
        form.addRow("Port", self.port)
        form.addRow("API key", key_row)
        form.addRow("Allowed host names", self.allowed_hosts)
        form.addRow("Base URL", url_row)
        form.addRow("Claude clients", claude_row)
        form.addRow("Requests served", self.requests)
        return form

    def _build_layout(self, intro: QLabel, form: QFormLayout) -> None:
        """The intro, the form, the error line and the curl example (shown once serving), top to bottom."""
        self.example = QLabel("")
        self.example.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.example.setWordWrap(True)
        self.example.setStyleSheet("color: #555; font-family: monospace;")
        lay = QVBoxLayout(self)
        lay.addWidget(intro)
        lay.addLayout(form)
        lay.addWidget(self.message)
        lay.addWidget(self.example)
        lay.addStretch(1)

    # -- state ------------------------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.server is not None and bool(getattr(self.server, "running", True))

    def set_engine(self, engine: Engine | None, model_id: str = "dynadraft") -> None:
        if engine is not self.engine and self.server is not None:
            self.switch.setChecked(False)  # the server holds the old engine: stop it
            if engine is not None:
                self.message.setText("The endpoint was stopped because the model changed; switch it on again.")
        self.engine = engine
        self.model_id = model_id
        self._sync()

    def _sync(self) -> None:
        busy = self._call is not None
        self.switch.setEnabled(not busy and (self.engine is not None or self.server is not None))
        editable = self.server is None and not busy
        for w in (self.host, self.port, self.api_key, self.allowed_hosts):
            w.setEnabled(editable)
        if self.engine is None and self.server is None:
            self.state.setText("load a model first")
        elif busy:
            self.state.setText("starting…" if self.switch.isChecked() else "stopping…")
        elif self.server is not None:
            self.state.setText("<span style='color:#2ea043'>● serving</span>")
        else:
            self.state.setText("off")

    def _toggled(self, on: bool) -> None:
        if self._call is not None:
            return
        if on and self.server is None:
            self.start()
        elif not on and self.server is not None:
            self.stop()

    def start(self) -> None:
        if self.engine is None:
            self._set_checked(False)
            return
        host = self.host.currentText().strip() or "127.0.0.1"
        port = self.port.value()
        key = self.api_key.text().strip() or None
        self.message.setText("")
        if not is_loopback(host) and not key:
            self.message.setText(
                "An API key is required to serve beyond this computer (bind address is not 127.0.0.1)."
            )
            self._set_checked(False)
            return
        engine, model_id = self.engine, self.model_id
        hosts = [h.strip() for h in self.allowed_hosts.text().split(",") if h.strip()]

        def work() -> Any:
            server = EndpointServer(engine, model_id, host, port, key, allowed_hosts=hosts)
            server.start()
            return server

        self._call = BackgroundCall(work, "dynadraft-gui-endpoint", self)
        self._call.succeeded.connect(self._started)
        self._call.failed.connect(self._start_failed)
        self._call.start()
        self._sync()

    def _started(self, server: Any) -> None:
        self._call = None
        self.server = server
        url = str(getattr(server, "url", f"http://{self.host.currentText()}:{self.port.value()}"))
        base = url.rstrip("/") + ("" if url.rstrip("/").endswith("/v1") else "/v1")
        self.url.setText(base)
        key = self.api_key.text().strip()
        self._claude_env = claude_environment(base.removesuffix("/v1"), self.model_id, key)
        shown = key[:6] + "…" if key else ""
        self.claude_env.setText(claude_environment(base.removesuffix("/v1"), self.model_id, shown))
        self.claude_env.setCursorPosition(0)  # the start (the URL) in view; the line is longer than the field
        auth = f' -H "Authorization: Bearer {key[:6]}…"' if key else ""
        self.example.setText(
            f"curl {base}/chat/completions{auth} -H 'Content-Type: application/json' "
            f'-d \'{{"model": "{self.model_id}", "messages": [{{"role": "user", "content": "Hi"}}]}}\''
        )
        self.timer.start()
        self._poll()
        self._sync()
        self.state_changed.emit(True)

    def _start_failed(self, message: str) -> None:
        self._call = None
        self.message.setText(f"Could not start the endpoint: {message}")
        self._set_checked(False)
        self._sync()
        self.error.emit(message)

    def stop(self) -> None:
        server = self.server
        if server is None:
            return
        self.timer.stop()
        self._call = BackgroundCall(server.stop, "dynadraft-gui-endpoint-stop", self)
        self._call.succeeded.connect(lambda _r: self._stopped())
        self._call.failed.connect(lambda m: self._stopped(m))
        self._call.start()
        self._sync()

    def _stopped(self, message: str = "") -> None:
        self._call = None
        self.server = None
        self.url.clear()
        self.claude_env.clear()
        self._claude_env = ""
        self.example.clear()
        if message:
            self.message.setText(f"Error while stopping: {message}")
        self._set_checked(False)
        self._sync()
        self.state_changed.emit(False)

    def _set_checked(self, on: bool) -> None:
        self.switch.blockSignals(True)
        self.switch.setChecked(on)
        self.switch.blockSignals(False)

    def _poll(self) -> None:
        if self.server is not None:
            self.requests.setText(str(getattr(self.server, "request_count", "?")))

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop synchronously (window close): the port must be released when the app exits."""
        if self._call is not None:
            self._call.wait(timeout)
        if self.server is not None:
            try:
                self.server.stop()
            finally:
                self.server = None

    def settings(self) -> dict[str, Any]:
        return {
            "host": self.host.currentText(),
            "port": self.port.value(),
            "api_key": self.api_key.text(),
            "allowed_hosts": self.allowed_hosts.text(),
        }

    def restore(self, s: dict[str, Any]) -> None:
        if s.get("host"):
            self.host.setCurrentText(str(s["host"]))
        if s.get("port"):
            self.port.setValue(int(s["port"]))
        if s.get("api_key"):
            self.api_key.setText(str(s["api_key"]))
        if s.get("allowed_hosts"):
            self.allowed_hosts.setText(str(s["allowed_hosts"]))
