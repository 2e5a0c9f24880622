"""Measurements on a running HybridNetwork: TCP goodput (measured_flow), byte counters per path, and, from
packet sockets on switch ports, the gap in OCS delivery across a reconfiguration and the most a host link lets
into its ToR within a short window.

Everything here observes real traffic between the run's Mininet hosts; nothing is modelled.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from hybridbed.controller.events import OcsEvent
from hybridbed.testbed import measured_flow
from hybridbed.testbed.network import HybridNetwork

FLOW_BASE_PORT = 5201
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
PROBE_UDP_PORT = 9999
# Between two probes of the delivery-gap stream (alternating between its two targets): each end of a
# measured gap is late by up to twice this, so it must be small beside the delays measured (10 ms and up).
PROBE_RESOLUTION_S = 0.0001
CHECK_MIN_RACKS = 3  # the reconfiguration probe moves rack 0's circuit from rack 1 to rack 2
SO_TIMESTAMPNS = 35  # <asm-generic/socket.h>; the socket module does not export it
TIMESTAMP_CMSG_SPACE = socket.CMSG_SPACE(16)  # struct timespec
# Measured flows: every end must listen or be connected within the first (an ssh session to a further server
# takes up to a second to open); the start time must reach every sender (an ssh session relays it); after
# the senders stop, the bytes still queued reach the receivers within the last.
FLOW_READY_TIMEOUT_S = 30.0
START_MARGIN_S = 0.2
FLOW_DRAIN_TIMEOUT_S = 30.0


@dataclass
class GoodputResult:
    """One flow as its receiver read it: mean goodput over the measured window, goodput in each whole second
    of it, and every byte it received (those before and after the window too)."""

    src: str
    dst: str
    mbps: float
    intervals_mbps: list[float]
    bytes_received: int


def _flow_end(net: HybridNetwork, host: tuple[int, int], args: list[str]) -> subprocess.Popen:
    """One end of a measured flow, in `host`, by the interpreter with hybridbed on its server."""
    rack, index = host
    node = net.host(rack, index)
    python = net.python_on(net.rack_server[rack])
    # Mininet's default `mnexec -d` forks when its process leads its group, as an ssh session's command on a
    # further server does; the session then ends with the parent and closes the child's stdin
    return node.popen(
        [python, "-m", "hybridbed.testbed.measured_flow", *args],
        stdin=subprocess.PIPE,
        mncmd=["mnexec", "-a", str(node.pid)],
    )


def _expect(procs: list[subprocess.Popen], word: str, names: list[str]) -> None:
    """Wait until every process has said `word`; name the first that says anything else or nothing in time."""
    deadline = time.monotonic() + FLOW_READY_TIMEOUT_S
    for proc, name in zip(procs, names):
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        line = proc.stdout.readline().decode(errors="replace").strip() if ready else "nothing"
        if line != word:
            raise RuntimeError(f"measured flow {name}: expected {word!r} within {FLOW_READY_TIMEOUT_S:g} s, got {line}")


def _outcome(proc: subprocess.Popen, name: str, timeout: float) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    try:
        report = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"measured flow {name} gave no report: {out[-300:]!r}") from None
    if "error" in report:
        raise RuntimeError(f"measured flow {name} failed: {report['error']}")
    return report


def window_goodput(
    src: str, dst: str, notes: list[list[float]], received: int, begin: float, seconds: float
) -> GoodputResult:
    """The goodput a receiver's (unix time, bytes so far) notes show from `begin` for `seconds`."""
    times, amounts = np.array(notes, dtype=float).T
    whole_edges = begin + np.arange(int(seconds) + 1)
    per_second = np.diff(np.interp(whole_edges, times, amounts)) * 8 / 1e6
    first, last = np.interp([begin, begin + seconds], times, amounts)
    return GoodputResult(src, dst, float((last - first) * 8 / seconds / 1e6), per_second.tolist(), received)


def goodput(
    net: HybridNetwork,
    pairs: list[tuple[tuple[int, int], tuple[int, int]]],
    seconds: float = 4.0,
    dscp: int | None = None,
    omit_s: float = 1.0,
) -> list[GoodputResult]:
    """Run one TCP flow per (src, dst) pair, all starting at one wall-clock instant, and read every one's
    goodput over the same window: the `seconds` after the first `omit_s` (slow start).

    `dscp` marks the flows' packets (steering mode `marked`). Servers' clocks agree within 5 ms (the
    multi-server preflight's bound), so flows on different servers share the window too.
    """
    ends = [(net.plan.host(*src).name, net.plan.host(*dst).name) for src, dst in pairs]
    names = [f"{src}->{dst}" for src, dst in ends]
    tos = str(dscp << 2 if dscp is not None else 0)
    receivers = [_flow_end(net, dst, ["receive", str(FLOW_BASE_PORT + i)]) for i, (_, dst) in enumerate(pairs)]
    senders: list[subprocess.Popen] = []
    try:
        _expect(receivers, measured_flow.LISTENING, names)
        for i, (src, dst) in enumerate(pairs):
            address, port = net.plan.host(*dst).ip, str(FLOW_BASE_PORT + i)
            senders.append(_flow_end(net, src, ["send", address, port, f"{omit_s + seconds:g}", "--tos", tos]))
        _expect(senders, measured_flow.READY, names)
        start = time.time() + START_MARGIN_S
        for proc in senders:
            assert proc.stdin is not None
            proc.stdin.write(f"{start:.6f}\n".encode())
            proc.stdin.flush()
        timeout = START_MARGIN_S + omit_s + seconds + FLOW_DRAIN_TIMEOUT_S
        for proc, name in zip(senders, names):
            _outcome(proc, name, timeout)
        reports = [_outcome(proc, name, timeout) for proc, name in zip(receivers, names)]
    finally:
        for proc in receivers + senders:  # those that failed or still wait
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [
        window_goodput(src, dst, report["notes"], report["bytes"], start + omit_s, seconds)
        for (src, dst), report in zip(ends, reports)
    ]


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


class PortTap:
    """Timestamps every frame `keep` accepts on the given switch ports (packet sockets in the fabric namespace,
    which the caller is in), so when frames passed can be read off afterwards: `times` and `sizes` (bytes, from
    the Ethernet header on) per port's key. `keep(frame, outgoing)` says whether a frame counts; `outgoing`: the
    switch sent it out of the port (else it came in from the link)."""

    def __init__(self, ports: Mapping[str, Hashable], keep: Callable[[bytes, bool], bool]):
        self.keep = keep
        self.sockets: dict[socket.socket, Hashable] = {}
        for interface, key in ports.items():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            s.bind((interface, 0))
            self.sockets[s] = key
        self.times: dict[Hashable, list[float]] = {key: [] for key in ports.values()}
        self.sizes: dict[Hashable, list[int]] = {key: [] for key in ports.values()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._capture, daemon=True)

    def __enter__(self) -> PortTap:
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
                if self.keep(frame, addr[2] == PACKET_OUTGOING):
                    key = self.sockets[s]
                    self.times[key].append(_kernel_timestamp(ancillary))
                    self.sizes[key].append(len(frame))


def ocs_port_tap(net: HybridNetwork, racks: list[int], ocs_port: int = 0) -> PortTap:
    """The probe packets the OCS switch sends out of the given racks' ports, keyed by rack: when circuits stop
    and start delivering."""
    ports = {net.plan.port_interface("ocs", net.plan.ocs_port(rack, ocs_port)): rack for rack in racks}
    return PortTap(ports, lambda frame, outgoing: outgoing and _is_probe(frame))


def largest_burst_bytes(times: list[float], sizes: list[int], window_s: float) -> int:
    """The most bytes of frames seen within any `window_s` (from one frame's time on)."""
    if not times:
        return 0
    order = np.argsort(times, kind="stable")
    at, cumulative = np.asarray(times)[order], np.concatenate(([0], np.cumsum(np.asarray(sizes)[order])))
    ends = np.searchsorted(at, at + window_s, side="left")
    return int((cumulative[ends] - cumulative[:-1]).max())


def host_link_burst(
    net: HybridNetwork, src: tuple[int, int], dst: tuple[int, int], window_s: float, seconds: float = 2.0
) -> tuple[int, int]:
    """A bulk TCP flow from `src` to `dst`: the most bytes of its frames that entered `src`'s ToR within any
    `window_s` (the host link's shaping bounds them), and how many frames entered in all."""
    rack, index = src
    port = net.plan.port_interface(net.plan.tor_name(rack), net.plan.host(rack, index).tor_port)
    with PortTap({port: src}, lambda frame, outgoing: not outgoing and _is_tcp_data(frame)) as tap:
        goodput(net, [(src, dst)], seconds=seconds, omit_s=0)
    return largest_burst_bytes(tap.times[src], tap.sizes[src], window_s), len(tap.times[src])


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


def _is_tcp_data(frame: bytes) -> bool:
    """An IPv4 TCP packet carrying data: longer than its headers (Ethernet, IPv4, TCP with options)."""
    return len(frame) > 100 and frame[12:14] == b"\x08\x00" and frame[23] == socket.IPPROTO_TCP


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


def delivery_gap(tap: PortTap, old_rack: int, new_rack: int, event: OcsEvent) -> float:
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
    with ocs_port_tap(net, [1, 2]) as tap:
        stream = udp_probe_stream(net, (0, 0), [(1, 0), (2, 0)], seconds=1.2, interval_s=PROBE_RESOLUTION_S)
        time.sleep(0.5)
        event = net.controller.set_circuits([{"src_rack": 0, "dst_rack": 2}])
        stream.wait()
    net.controller.set_circuits([])
    if event is None:
        raise RuntimeError("the controller reported no reconfiguration from circuit 0->1 to 0->2")
    return delivery_gap(tap, 1, 2, event), event
