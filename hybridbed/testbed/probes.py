"""Measurements on a running HybridNetwork: TCP goodput (iperf3), byte counters per path, and the gap
in OCS delivery across a reconfiguration (packet sockets on the OCS switch ports).

Everything here observes real traffic between the run's Mininet hosts; nothing is modelled.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass

from mininet.node import Host

from hybridbed.controller.events import OcsEvent
from hybridbed.testbed.network import HybridNetwork

IPERF_BASE_PORT = 5201
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
PROBE_UDP_PORT = 9999
# Between two probes of the delivery-gap stream (alternating between its two targets): each end of a
# measured gap is late by up to twice this, so it must be small beside the delays measured (10 ms and up).
PROBE_RESOLUTION_S = 0.0001
CHECK_MIN_RACKS = 3  # the reconfiguration probe moves rack 0's circuit from rack 1 to rack 2
SO_TIMESTAMPNS = 35  # <asm-generic/socket.h>; the socket module does not export it
TIMESTAMP_CMSG_SPACE = socket.CMSG_SPACE(16)  # struct timespec


@dataclass
class GoodputResult:
    """One iperf3 flow as its receiver saw it: mean goodput after the omitted start, per-second goodput."""

    src: str
    dst: str
    mbps: float
    intervals_mbps: list[float]
    bytes_received: int


def _start_iperf_server(host: Host, port: int) -> None:
    host.cmd(f"iperf3 -s -1 -D -J -p {port}")


def _wait_listening(host: Host, port: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while f":{port} " not in host.cmd(f"ss -ltn sport = :{port}"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"iperf3 server on {host.name}:{port} did not start")
        time.sleep(0.05)


def _parse_iperf(src: str, dst: str, output: str) -> GoodputResult:
    try:
        report = json.loads(output)
    except ValueError:
        raise RuntimeError(f"iperf3 {src}->{dst} gave no JSON report: {output[-300:]!r}") from None
    if "error" in report:
        raise RuntimeError(f"iperf3 {src}->{dst} failed: {report['error']}")
    # the receiver's intervals: the sender's only say when bytes entered its (possibly large) socket buffer
    intervals = [i["sum"]["bits_per_second"] / 1e6 for i in report["server_output_json"]["intervals"]]
    received = report["end"]["sum_received"]
    return GoodputResult(src, dst, received["bits_per_second"] / 1e6, intervals, int(received["bytes"]))


def goodput(
    net: HybridNetwork,
    pairs: list[tuple[tuple[int, int], tuple[int, int]]],
    seconds: float = 4.0,
    dscp: int | None = None,
    omit_s: float = 1.0,
) -> list[GoodputResult]:
    """Run one TCP flow per (src, dst) pair, all at once, and return each one's received goodput.

    `omit_s` leaves slow start out of the average. `dscp` marks the flow's packets (steering mode `marked`).
    """
    servers = []
    for i, (_, (r, h)) in enumerate(pairs):
        port = IPERF_BASE_PORT + i
        _start_iperf_server(net.host(r, h), port)
        servers.append((net.host(r, h), port))
    for host, port in servers:
        _wait_listening(host, port)
    tos = ["--tos", str(dscp << 2)] if dscp is not None else []
    clients = []
    for i, ((sr, sh), (dr, dh)) in enumerate(pairs):
        dst_ip = net.plan.host(dr, dh).ip
        cmd = [
            "iperf3",
            "-c",
            dst_ip,
            "-p",
            str(IPERF_BASE_PORT + i),
            "-t",
            f"{seconds + omit_s:g}",
            "-O",
            f"{omit_s:g}",
            "-J",
            "--get-server-output",
            *tos,
        ]
        clients.append(net.host(sr, sh).popen(cmd))
    results = []
    for ((sr, sh), (dr, dh)), proc in zip(pairs, clients):
        out, _ = proc.communicate(timeout=seconds + omit_s + 30)
        results.append(_parse_iperf(net.plan.host(sr, sh).name, net.plan.host(dr, dh).name, out.decode()))
    return results


def port_bytes(net: HybridNetwork) -> dict[str, dict[int, int]]:
    """tx bytes per switch port, from the controller's OpenFlow port counters."""
    return {sw: {int(p): c["tx_bytes"] for p, c in ports.items()} for sw, ports in net.controller.ports().items()}


def settled_port_bytes(net: HybridNetwork, timeout: float = 15.0, interval: float = 1.2) -> dict[str, dict[int, int]]:
    """Port counters once queued traffic has drained and OVS has refreshed its statistics (two reads
    `interval` apart agree; OVS updates port counters about once a second): a sender is done when its
    bytes are in the socket, not when they have left the shaped queues."""
    previous = port_bytes(net)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(interval)
        current = port_bytes(net)
        if current == previous:
            return current
        previous = current
    raise RuntimeError(f"port counters still moving after {timeout:.0f} s")


def bytes_delta(before: dict[str, dict[int, int]], after: dict[str, dict[int, int]], switch: str, port: int) -> int:
    return after[switch][port] - before[switch][port]


class OcsPortTap:
    """Timestamps every packet the OCS switch sends out of the given ports (packet sockets in the fabric
    namespace), so the instants at which circuits stop and start delivering can be read off afterwards."""

    def __init__(self, net: HybridNetwork, racks: list[int], ocs_port: int = 0):
        self.sockets: dict[socket.socket, int] = {}
        for rack in racks:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            s.bind((f"ocs-eth{net.plan.ocs_port(rack, ocs_port)}", 0))
            self.sockets[s] = rack
        self.times: dict[int, list[float]] = {rack: [] for rack in racks}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._capture, daemon=True)

    def __enter__(self) -> OcsPortTap:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        for s in self.sockets:
            s.close()

    def _capture(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select(list(self.sockets), [], [], 0.05)
            for s in ready:
                frame, ancillary, _, addr = s.recvmsg(65535, TIMESTAMP_CMSG_SPACE)
                if addr[2] == PACKET_OUTGOING and _is_probe(frame):
                    self.times[self.sockets[s]].append(_kernel_timestamp(ancillary))


def _kernel_timestamp(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The time the kernel saw the packet (SO_TIMESTAMPNS), so a slow capture thread does not skew gaps."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = struct.unpack("qq", data[:16])
            return seconds + nanoseconds / 1e9
    raise RuntimeError("packet socket delivered a frame without its kernel timestamp")


def _is_probe(frame: bytes) -> bool:
    """An IPv4 UDP packet to the probe port (Ethernet, IPv4 without options, as the probe sender makes them)."""
    return (
        len(frame) >= 38
        and frame[12:14] == b"\x08\x00"
        and frame[23] == socket.IPPROTO_UDP
        and int.from_bytes(frame[36:38], "big") == PROBE_UDP_PORT
    )


def udp_probe_stream(
    net: HybridNetwork,
    src: tuple[int, int],
    dsts: list[tuple[int, int]],
    seconds: float,
    interval_s: float = 0.0005,
    dscp: int | None = None,
):
    """Start a stream of small UDP packets from src to each destination in turn, one every `interval_s`."""
    targets = [net.plan.host(r, h).ip for r, h in dsts]
    tos = (dscp << 2) if dscp is not None else 0
    code = (
        "import socket,time\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        f"s.setsockopt(socket.IPPROTO_IP,socket.IP_TOS,{tos})\n"
        f"targets={targets!r}; end=time.monotonic()+{seconds}; nxt=time.monotonic(); i=0\n"
        "while time.monotonic()<end:\n"
        f"  s.sendto(b'x'*64,(targets[i%len(targets)],{PROBE_UDP_PORT})); i+=1; nxt+={interval_s}\n"
        "  d=nxt-time.monotonic()\n"
        "  if d>0: time.sleep(d)\n"
    )
    return net.host(*src).popen(["python3", "-c", code])


def delivery_gap(tap: OcsPortTap, old_rack: int, new_rack: int, event: OcsEvent) -> float:
    """Seconds between the last packet the old circuit delivered before the reconfiguration and the first
    packet the new circuit delivered after it."""
    before = [t for t in tap.times[old_rack] if t <= event.done]
    after = [t for t in tap.times[new_rack] if t >= event.requested]
    if not before or not after:
        raise RuntimeError(f"no OCS delivery seen around the reconfiguration (old: {len(before)}, new: {len(after)})")
    return after[0] - before[-1]


def reconfiguration_gap(net: HybridNetwork) -> tuple[float, OcsEvent]:
    """Reconfigure 0->1 into 0->2 under a probe stream to both; return (gap in s, the event)."""
    if net.plan.racks < CHECK_MIN_RACKS:
        raise ValueError(f"measuring the OCS delivery gap needs at least {CHECK_MIN_RACKS} racks")
    net.controller.set_circuits([{"src_rack": 0, "dst_rack": 1}])
    with OcsPortTap(net, [1, 2]) as tap:
        stream = udp_probe_stream(net, (0, 0), [(1, 0), (2, 0)], seconds=1.2, interval_s=PROBE_RESOLUTION_S)
        time.sleep(0.5)
        event = net.controller.set_circuits([{"src_rack": 0, "dst_rack": 2}])
        stream.wait()
    net.controller.set_circuits([])
    if event is None:
        raise RuntimeError("the controller reported no reconfiguration from circuit 0->1 to 0->2")
    return delivery_gap(tap, 1, 2, event), event
