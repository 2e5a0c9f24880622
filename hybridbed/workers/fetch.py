"""Moving task data between hosts over real TCP on the emulated network: a file server in every worker
(map outputs, input block replicas) and the client that tasks fetch with.

A request is one JSON line `{"paths": [...], "rate_bps": ..., "dscp": ...}`; the answer is, for each path in turn, the
file's size (8 bytes, big-endian; -1 if there is no such file, and nothing follows) and its bytes, sent
with sendfile(2): a reducer copies several map outputs of one host over one connection, as Hadoop's
fetchers do. A rate cap is enforced by the kernel's TCP pacing on the sending socket
(SO_MAX_PACING_RATE), so the cap shapes the flow itself; a DSCP marks the connection's packets (IP_TOS), which
steering modes `elephant` and `marked` send over a lit circuit. Where the host's disk is shared, the server
reads for a request at the share the worker agent gives it, as the simulator puts every transfer on its
source's disk.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hybridbed.workers.pacing import Pacer, Rate

DATA_PORT = 7070
SO_MAX_PACING_RATE = 47  # <asm-generic/socket.h>
CHUNK = 1 << 16
# How often a fetch notes the bytes it has received: which of them rode a circuit is read off these notes
# against the circuit timeline (results/path_accounting.py), so they must be much finer than a circuit's lit
# spell (the reconfiguration interval: 1 s in the JobPacker paper, 0.1 s at the low end of its §5.4 sweep).
RECEIVED_SAMPLE_S = 0.05
SERVE_CHUNK = 1 << 16  # bytes sent per take of a paced disk read's tokens


class DataServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, ip: str, data_dir: Path, disk_reads: Callable[[], AbstractContextManager[Rate]] | None = None):
        """`disk_reads`: where the host's disk is shared, a read of it for as long as a request is served,
        giving the rate it is paced at (its share of the disk, `workers.host_share`)."""
        self.data_dir = data_dir.resolve()
        self.disk_reads = disk_reads
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
        with self.server.disk_reads() if self.server.disk_reads else contextlib.nullcontext(None) as rate:
            pacer = Pacer(rate, saved_s=0.0) if rate is not None else None
            for name in request["paths"]:
                path = (self.server.data_dir / name).resolve()
                if self.server.data_dir not in path.parents or not path.is_file():
                    self.wfile.write(struct.pack(">q", -1))
                    return
                with path.open("rb") as data:
                    size = path.stat().st_size
                    self.wfile.write(struct.pack(">q", size))
                    self.wfile.flush()
                    self._send(data, size, pacer)

    def _send(self, data: BinaryIO, size: int, pacer: Pacer | None) -> None:
        """The file's bytes, paced at the disk's share where it is shared."""
        if pacer is None:
            self.connection.sendfile(data)
            return
        for offset in range(0, size, SERVE_CHUNK):
            count = min(SERVE_CHUNK, size - offset)
            pacer.take(count)
            self.connection.sendfile(data, offset, count)


@dataclass
class Fetch:
    src_ip: str
    paths: list[str]
    bytes: int
    start: float
    end: float
    received: list[tuple[float, int]]  # (unix time, bytes received so far), every RECEIVED_SAMPLE_S and at the end


class FetchError(RuntimeError):
    """A fetch failed; `copied` is what its connection had received whole before (None: not one file), which
    a reducer keeps, as Hadoop's Fetcher keeps each map output it has copied."""

    def __init__(self, message: str, copied: Fetch | None = None) -> None:
        super().__init__(message)
        self.copied = copied


def fetch(
    ip: str,
    paths: list[str],
    rate_bps: float | None,
    pacer: Pacer | None,
    *,
    timeout_s: float,
    dscp: int | None = None,
) -> Fetch:
    """Read files from a worker's data server over one connection, one after the other; the bytes are
    counted, not kept. The sender paces the connection at `rate_bps` and marks its packets with `dscp`;
    `pacer`, if given, holds the reading side to a rate that may change meanwhile (TCP's flow control then
    slows the sender). Connecting, or any read, that takes longer than `timeout_s` fails the fetch: Hadoop's
    timeouts differ between a shuffle fetch and an HDFS block read (config/constants.py)."""
    start = time.time()
    received = 0  # bytes of the files received whole
    whole = 0  # files received whole
    notes: list[tuple[float, int]] = []
    noted_at = start
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
                    if (now := time.time()) - noted_at >= RECEIVED_SAMPLE_S:  # once paid for: a paced read's
                        notes.append((now, received + size - left))  # bytes came in over its wait
                        noted_at = now
                received += size
                whole += 1
    except (OSError, FetchError) as err:
        end = time.time()  # the bytes of a file cut short are not kept: the notes stop at the files received whole
        copied = Fetch(
            ip, paths[:whole], received, start, end, [*((t, min(b, received)) for t, b in notes), (end, received)]
        )
        raise FetchError(f"fetching {', '.join(paths)} from {ip}: {err}", copied if whole else None) from err
    end = time.time()
    return Fetch(ip, paths, received, start, end, [*notes, (end, received)])


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise FetchError("connection closed before the header")
        data += chunk
    return data
