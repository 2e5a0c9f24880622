"""How long an emulated run's TCP connections sat waiting for a retransmission timer, read off the hosts'
packet captures (`capture_packets`, pcap/<host>.pcap: every TCP packet's headers on the host's interface).

The fluid simulator shares each link's rate among its flows and loses nothing. Emulated TCP loses segments at
full switch queues and mostly recovers within a round trip (fast retransmit, on the acknowledgements that
follow). But where a retransmission is lost too, or a connection's window holds too few segments for the
acknowledgements to tell, only a timer brings it back (the retransmission timeout, backed off twice for each
loss in a row, or the tail loss probe), and until then the connection sends nothing. A packet trace of such
stalls in an emulated Fair run is in docs/network.md ("What TCP costs the emulation").

Read from the sending host's capture: a retransmission (a segment that starts below the highest sequence the
connection has sent) is timer-driven when its connection had been silent, nothing sent and nothing arrived,
for at least TCP_RTO_MIN before it: no acknowledgement triggered it, and the application cannot. Its silence
is the time the connection waited for its timer. (Tail loss probes on a shorter timer are left out; they
wait less than that.)
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

import dpkt
import numpy as np

# Linux's TCP_RTO_MIN (include/net/tcp.h): the shortest retransmission timeout.
TCP_RTO_MIN_S = 0.2
SEQ_SPACE = 1 << 32


@dataclass
class _Connection:
    first_s: float
    last_s: float  # its last packet, either way
    sent_end: int | None = None  # the highest sequence sent, relative to the first segment's
    first_seq: int = 0
    bytes_in: int = 0  # payload that arrived (a fetch's request, where this host serves it)
    silences: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class TimerStalls:
    """One run's (or one host's) connections and the silences before their timer-driven retransmissions."""

    connections: int
    connection_s: float  # every connection's time from its first to its last packet, summed
    silences_s: list[float]

    def summary(self) -> dict:
        silences = np.array(self.silences_s)
        waited = float(silences.sum())
        return {
            "connections": self.connections,
            "timer_retransmissions": len(silences),
            "timer_silence_s": round(waited, 3),
            "timer_silence_share": round(waited / self.connection_s, 4) if self.connection_s else None,
            "timer_silence_median_s": round(float(np.median(silences)), 3) if len(silences) else None,
            "timer_silence_max_s": round(float(silences.max()), 3) if len(silences) else None,
        }


def host_stalls(pcap: Path, host_ip: str) -> TimerStalls:
    """The timer stalls of the connections `host_ip` sent most of the data on (a fetch's data, not its
    request line), from its own capture."""
    address = socket.inet_aton(host_ip)
    connections: dict[tuple, _Connection] = {}
    ended: list[_Connection] = []  # those whose ports a later connection took again
    with pcap.open("rb") as f:
        for t, frame in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(frame).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            outgoing = ip.src == address
            key = (ip.src, tcp.sport, ip.dst, tcp.dport) if outgoing else (ip.dst, tcp.dport, ip.src, tcp.sport)
            conn = connections.get(key)
            if conn is not None and tcp.flags & dpkt.tcp.TH_SYN and conn.sent_end is not None:
                ended.append(conn)  # a new connection on the same ports: its sequence starts afresh
                conn = None
            if conn is None:
                conn = connections[key] = _Connection(first_s=t, last_s=t)
            payload = ip.len - 4 * ip.hl - 4 * tcp.off  # the capture keeps headers only: lengths from the headers
            if outgoing and payload > 0:
                _sent(conn, t, tcp.seq, payload)
            if not outgoing:
                conn.bytes_in += max(payload, 0)
            conn.last_s = t
    sending = [c for c in [*ended, *connections.values()] if c.sent_end is not None and c.sent_end > c.bytes_in]
    return TimerStalls(
        connections=len(sending),
        connection_s=sum(c.last_s - c.first_s for c in sending),
        silences_s=[s for c in sending for s in c.silences],
    )


def _sent(conn: _Connection, t: float, seq: int, payload: int) -> None:
    if conn.sent_end is None:
        conn.first_seq, conn.sent_end = seq, payload
        return
    start = (seq - conn.first_seq) % SEQ_SPACE  # sequence numbers wrap; a connection sends far less than 4 GB
    if start < conn.sent_end and t - conn.last_s >= TCP_RTO_MIN_S:
        conn.silences.append(t - conn.last_s)
    conn.sent_end = max(conn.sent_end, start + payload)


def run_stalls(capture_dir: Path, host_ips: dict[str, str]) -> TimerStalls:
    """Every host's stalls together (each connection counted once, at the capture of the host that sent its
    data)."""
    hosts = [host_stalls(capture_dir / f"{name}.pcap", ip) for name, ip in sorted(host_ips.items())]
    return TimerStalls(
        connections=sum(h.connections for h in hosts),
        connection_s=sum(h.connection_s for h in hosts),
        silences_s=[s for h in hosts for s in h.silences_s],
    )
