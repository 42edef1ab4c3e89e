"""The endpoint switch: on, a real OpenAI-style request through it, off (port released)."""

from __future__ import annotations

import os
import shlex
import socket
from pathlib import Path

import pytest
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QPushButton

from app.gui.main import MainWindow


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def test_endpoint_toggle_serves_and_releases_port(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    httpx = pytest.importorskip("httpx")
    w: MainWindow = make_window(engine=gui_engine, model_label="smollm2")
    panel = w.endpoint
    port = _free_port()
    panel.port.setValue(port)
    panel.host.setCurrentText("127.0.0.1")
    assert panel.switch.isEnabled()
    with qtbot.waitSignal(panel.state_changed, timeout=30_000) as blocker:
        panel.switch.setChecked(True)
    assert blocker.args == [True], panel.message.text()
    base = panel.url.text()
    assert base == f"http://127.0.0.1:{port}/v1"
    r = httpx.post(
        f"{base}/chat/completions",
        json={"model": panel.model_id, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] is not None
    qtbot.waitUntil(lambda: panel.requests.text() not in ("0", "?"), timeout=5_000)
    assert "endpoint on" in w.st_endpoint.text()
    # the Claude clients' line, copied as a user would, is all the anthropic SDK needs
    anthropic = pytest.importorskip("anthropic")
    panel.findChild(QPushButton, "copy_claude_env").click()
    env = dict(pair.split("=", 1) for pair in shlex.split(QGuiApplication.clipboard().text()))
    assert env["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{port}"
    claude = anthropic.Anthropic(base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"], max_retries=0)
    msg = claude.messages.create(
        model=env["ANTHROPIC_MODEL"], max_tokens=4, messages=[{"role": "user", "content": "Hi"}], timeout=120
    )
    assert msg.usage.output_tokens >= 1 and env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == panel.model_id
    shots = os.environ.get("DYNADRAFT_SHOTS")
    if shots:  # a screenshot for the report: DYNADRAFT_SHOTS=/work/brief/shots pytest ...
        w.tabs.setCurrentWidget(panel)
        qtbot.wait(300)
        w.grab().save(str(Path(shots) / "endpoint-claude-clients.png"))
    with qtbot.waitSignal(panel.state_changed, timeout=30_000) as blocker:
        panel.switch.setChecked(False)
    assert blocker.args == [False]
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    probe.bind(("127.0.0.1", port))  # released
    probe.close()


def test_port_in_use_is_reported(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=gui_engine)
    blocker_sock = socket.socket()
    blocker_sock.bind(("127.0.0.1", 0))
    blocker_sock.listen(1)
    try:
        w.endpoint.port.setValue(blocker_sock.getsockname()[1])
        with qtbot.waitSignal(w.endpoint.error, timeout=30_000):
            w.endpoint.switch.setChecked(True)
        assert "in use" in w.endpoint.message.text()
        assert not w.endpoint.switch.isChecked() and w.endpoint.server is None
    finally:
        blocker_sock.close()


def test_allowed_host_names_from_the_panel(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.gui import endpoint as ep

    if ep.EndpointServer is None:
        pytest.skip(f"app.server.runner is not available in this build: {ep.SERVER_ERROR}")
    httpx = pytest.importorskip("httpx")
    w: MainWindow = make_window(engine=gui_engine, model_label="smollm2")
    panel = w.endpoint
    panel.port.setValue(_free_port())
    panel.allowed_hosts.setText("mybox.lan, *.internal")
    with qtbot.waitSignal(panel.state_changed, timeout=30_000):
        panel.switch.setChecked(True)
    try:
        base = panel.url.text()
        for host, status in (("mybox.lan:8080", 200), ("a.b.internal", 200), ("localhost", 200), ("evil.example", 403)):
            assert httpx.get(f"{base}/models", headers={"Host": host}, timeout=30).status_code == status, host
        assert not panel.allowed_hosts.isEnabled()  # fixed while serving, like the other settings
        assert w.endpoint.settings()["allowed_hosts"] == "mybox.lan, *.internal"
    finally:
        with qtbot.waitSignal(panel.state_changed, timeout=30_000):
            panel.switch.setChecked(False)
