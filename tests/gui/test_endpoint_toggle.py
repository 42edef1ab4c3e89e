"""The endpoint switch: on, a real OpenAI-style request through it, off (port released)."""

from __future__ import annotations

import socket

import pytest

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
