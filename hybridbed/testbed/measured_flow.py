"""The two ends of a measured TCP flow, run inside emulated hosts (`python -m hybridbed.testbed.measured_flow`).

Flows measured together share links, so each one's goodput is read over one window on the wall clock,
the same for all: a flow measured over a window of its own (iperf3's receiver starts its clock when its
control message arrives, up to a second late on a loaded fabric) runs partly alone and takes its peers'
share, which overstated the aggregate by up to half. So the sender starts at a wall-clock instant it
is told, and the receiver notes when it read its bytes; the caller reads every flow over the same window.

Both ends print one line of JSON when they finish, or {"error": ...}; before that, the receiver prints
LISTENING once it listens and the sender READY once it is connected, and then waits for the start time on
stdin.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time

LISTENING = "listening"
READY = "ready"
NOTE_INTERVAL_S = 0.05  # between the receiver's notes: small beside the windows read (a second and up)
CHUNK_BYTES = 65536
ACCEPT_TIMEOUT_S = 60.0  # the sender connects once every receiver listens; past this something failed
SEND_POLL_S = 0.05  # a blocked send returns this often, so the sender stops on time
# A sender later than this at its start would run partly alone: an error, not a measurement.
START_TOLERANCE_S = 0.05


def _say(message: dict | str) -> None:
    print(json.dumps(message) if isinstance(message, dict) else message, flush=True)


def receive(port: int) -> dict:
    """Accept one connection and read it to the end; note (unix time, bytes so far) every NOTE_INTERVAL_S."""
    with socket.create_server(("", port)) as server:
        server.settimeout(ACCEPT_TIMEOUT_S)
        _say(LISTENING)
        try:
            conn, _ = server.accept()
        except TimeoutError:
            return {"error": f"no sender connected to port {port} in {ACCEPT_TIMEOUT_S:g} s"}
    buffer = bytearray(CHUNK_BYTES)
    total = 0
    notes = [[time.time(), 0]]
    next_note = notes[0][0] + NOTE_INTERVAL_S
    with conn:
        while got := conn.recv_into(buffer):
            total += got
            now = time.time()
            if now >= next_note:
                notes.append([now, total])
                next_note = now + NOTE_INTERVAL_S
    notes.append([time.time(), total])
    return {"notes": notes, "bytes": total}


def send(address: str, port: int, seconds: float, tos: int) -> dict:
    """Connect, say READY, read the start time from stdin, and send from then for `seconds`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        sock.connect((address, port))
        _say(READY)
        start = float(sys.stdin.readline())
        late = time.time() - start
        if late > START_TOLERANCE_S:
            return {"error": f"told to start {late:.3f} s ago"}
        time.sleep(max(0.0, -late))
        sock.settimeout(SEND_POLL_S)
        chunk = bytes(CHUNK_BYTES)
        end = start + seconds
        sent = 0
        while time.time() < end:
            try:
                sent += sock.send(chunk)
            except TimeoutError:
                continue
    return {"sent": sent}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hybridbed.testbed.measured_flow")
    sub = parser.add_subparsers(dest="end", required=True)
    receiver = sub.add_parser("receive")
    receiver.add_argument("port", type=int)
    sender = sub.add_parser("send")
    sender.add_argument("address")
    sender.add_argument("port", type=int)
    sender.add_argument("seconds", type=float)
    sender.add_argument("--tos", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        result = receive(args.port) if args.end == "receive" else send(args.address, args.port, args.seconds, args.tos)
    except OSError as error:
        result = {"error": str(error)}
    _say(result)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
