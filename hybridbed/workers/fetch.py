"""Moving task data between hosts over real TCP on the emulated network: a file server in every worker
(map outputs, input block replicas) and the client that tasks fetch with.

A request is one JSON line `{"paths": [...], "rate_bps": ..., "dscp": ...}`; the answer is, for each path in turn, the
file's size (8 bytes, big-endian; -1 if there is no such file, and nothing follows) and its bytes, sent
with sendfile(2): a reducer copies several map outputs of one host over one connection, as Hadoop's
fetchers do. A rate cap is enforced by the kernel's TCP pacing on the sending socket
(SO_MAX_PACING_RATE), so the cap shapes the flow itself; a DSCP marks the connection's packets (IP_TOS), which
steering modes `elephant` and `marked` send over a lit circuit.
"""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hybridbed.workers.pacing import Pacer

DATA_PORT = 7070
SO_MAX_PACING_RATE = 47  # <asm-generic/socket.h>
CHUNK = 1 << 16


class DataServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, ip: str, data_dir: Path):
        self.data_dir = data_dir.resolve()
        super().__init__((ip, DATA_PORT), _DataRequest)

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, daemon=True, name="data-server").start()


class _DataRequest(socketserver.StreamRequestHandler):
    server: DataServer

    def handle(self) -> None:
        request = json.loads(self.rfile.readline())
        if request.get("rate_bps"):
            self.connection.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, int(request["rate_bps"] / 8))
        if request.get("dscp"):
            self.connection.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, request["dscp"] << 2)
        for name in request["paths"]:
            path = (self.server.data_dir / name).resolve()
            if self.server.data_dir not in path.parents or not path.is_file():
                self.wfile.write(struct.pack(">q", -1))
                return
            with path.open("rb") as data:
                self.wfile.write(struct.pack(">q", path.stat().st_size))
                self.wfile.flush()
                self.connection.sendfile(data)


class FetchError(RuntimeError):
    pass


@dataclass
class Fetch:
    src_ip: str
    paths: list[str]
    bytes: int
    start: float
    end: float


def fetch(
    ip: str,
    paths: list[str],
    rate_bps: float | None = None,
    pacer: Pacer | None = None,
    timeout_s: float = 60.0,
    dscp: int | None = None,
) -> Fetch:
    """Read files from a worker's data server over one connection, one after the other; the bytes are
    counted, not kept. The sender paces the connection at `rate_bps` and marks its packets with `dscp`;
    `pacer`, if given, holds the reading side to a rate that may change meanwhile (TCP's flow control then
    slows the sender)."""
    start = time.time()
    received = 0
    try:
        with socket.create_connection((ip, DATA_PORT), timeout=timeout_s) as sock:
            sock.sendall((json.dumps({"paths": paths, "rate_bps": rate_bps, "dscp": dscp}) + "\n").encode())
            for path in paths:
                (size,) = struct.unpack(">q", _read_exact(sock, 8))
                if size < 0:
                    raise FetchError(f"{ip} has no {path}")
                left = size
                while left:
                    chunk = sock.recv(min(CHUNK, left))
                    if not chunk:
                        raise FetchError(f"{ip} closed with {left} of {size} bytes of {path} to come")
                    left -= len(chunk)
                    if pacer is not None:
                        pacer.take(len(chunk))
                received += size
    except OSError as err:
        raise FetchError(f"fetching {', '.join(paths)} from {ip}: {err}") from err
    return Fetch(ip, paths, received, start, time.time())


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise FetchError("connection closed before the header")
        data += chunk
    return data
