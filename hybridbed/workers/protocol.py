"""The control channel between the scheduler and the workers: JSON objects, one per line, over a stream
socket (a Unix socket under the run directory reaches every Mininet host without touching the data
network; a TCP socket works the same for workers on real machines)."""
from __future__ import annotations

import json
import socket
import threading

SOCKET_NAME = "scheduler.sock"


class Channel:
    """One end of a control connection; `send` may be called from any thread."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._reader = sock.makefile("r", encoding="utf-8")
        self._lock = threading.Lock()

    @classmethod
    def connect_unix(cls, path: str) -> "Channel":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        return cls(sock)

    def send(self, message: dict) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with self._lock:
            self.sock.sendall(data)

    def receive(self) -> dict | None:
        """The next message, or None once the other end has closed."""
        line = self._reader.readline()
        return json.loads(line) if line else None

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
