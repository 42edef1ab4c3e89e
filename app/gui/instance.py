"""One app per data folder: a second launch hands over to the running window (QLocalServer) and exits at once."""

from __future__ import annotations

import hashlib

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from app.paths import get_paths

_CONNECT_MS = 300  # a live first instance answers within milliseconds; a stale socket file fails at once
_ACTIVATE = b"activate\n"


def instance_name() -> str:
    """The local socket name for this user's data folder (DYNADRAFT_HOME keeps test and real apps apart)."""
    digest = hashlib.sha256(str(get_paths().history.resolve()).encode()).hexdigest()[:16]
    return f"dynadraft-{digest}"


class SingleInstance(QObject):
    """`claim()` returns True for the first instance (which then listens); `activated` fires when another starts."""

    activated = Signal()

    def __init__(self, name: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name or instance_name()
        self.server: QLocalServer | None = None

    def notify_running(self) -> bool:
        """Ask a running instance to come to the front; False when none answers."""
        sock = QLocalSocket()
        sock.connectToServer(self.name)
        if not sock.waitForConnected(_CONNECT_MS):
            return False
        sock.write(_ACTIVATE)
        sock.waitForBytesWritten(_CONNECT_MS)
        sock.disconnectFromServer()
        return True

    def claim(self) -> bool:
        if self.notify_running():
            return False
        QLocalServer.removeServer(self.name)  # a socket file left by a crashed instance
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.name):
            return True  # cannot listen (odd platform state): run anyway, just without hand-over
        server.newConnection.connect(self._on_connection)
        self.server = server
        return True

    def _on_connection(self) -> None:
        assert self.server is not None
        while (sock := self.server.nextPendingConnection()) is not None:
            sock.readyRead.connect(lambda s=sock: self._read(s))
            sock.disconnected.connect(sock.deleteLater)
            if sock.bytesAvailable():
                self._read(sock)

    def _read(self, sock: QLocalSocket) -> None:
        if bytes(sock.readAll().data()).startswith(_ACTIVATE.strip()):
            self.activated.emit()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
