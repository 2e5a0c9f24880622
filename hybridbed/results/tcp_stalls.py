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
wait less than that.) A wait that began at the timer's previous retransmission, nothing having passed since,
is the timer backed off after that retransmission was lost too; the summary gives those waits' share.
`flow_connections` pairs flows.csv's rows with the captured connections; per reducer, `reducer_waits` gives
the time during which any of its connections waited, which bench/sim_vs_emu.py sets against how much longer
its shuffle took than simulated, and `path_waits` splits the waits by the path the connections took.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dpkt
import numpy as np
import pandas as pd
from scipy.optimize import linear_sum_assignment

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
    waits: list[tuple[float, float]] = field(default_factory=list)  # (silent from, timer's retransmission)


@dataclass(frozen=True)
class ConnectionWaits:
    """One data connection, read at its sender's capture: to whom, when (capture times, Unix seconds) and
    the spells it waited for a timer."""

    receiver_ip: str
    first_s: float
    last_s: float
    waits: list[tuple[float, float]]


@dataclass(frozen=True)
class TimerStalls:
    """One run's (or one host's) connections and the silences before their timer-driven retransmissions."""

    connections: int
    connection_s: float  # every connection's time from its first to its last packet, summed
    silences_s: list[float]
    backed_off_s: list[float]  # those of the silences that began at a timer's retransmission: it was lost too

    @classmethod
    def of(cls, connections: list[ConnectionWaits]) -> TimerStalls:
        return cls(
            connections=len(connections),
            connection_s=sum(c.last_s - c.first_s for c in connections),
            silences_s=[end - start for c in connections for start, end in c.waits],
            backed_off_s=[silence for c in connections for silence in backed_off(c.waits)],
        )

    def summary(self) -> dict:
        silences = np.array(self.silences_s)
        waited = float(silences.sum())
        return {
            "connections": self.connections,
            "timer_retransmissions": len(silences),
            "timer_silence_s": round(waited, 3),
            "timer_silence_share": round(waited / self.connection_s, 4) if self.connection_s else None,
            "timer_backed_off_share": round(sum(self.backed_off_s) / waited, 4) if waited else None,
            "timer_silence_median_s": round(float(np.median(silences)), 3) if len(silences) else None,
            "timer_silence_max_s": round(float(silences.max()), 3) if len(silences) else None,
        }


def backed_off(waits: list[tuple[float, float]]) -> list[float]:
    """The silences of a connection's `waits` that began at its timer's previous retransmission, nothing having
    gone either way since: that retransmission was lost too, and the timer backed off."""
    return [end - start for (_, before), (start, end) in zip(waits, waits[1:]) if start == before]


def host_connections(pcap: Path, host_ip: str) -> list[ConnectionWaits]:
    """The connections `host_ip` sent most of the data on (a fetch's data, not its request line), from its own
    capture, each with its timer waits."""
    address = socket.inet_aton(host_ip)
    connections: dict[tuple, _Connection] = {}
    ended: list[tuple[tuple, _Connection]] = []  # those whose ports a later connection took again
    for t, frame in _frames(pcap):
        ip = frame.data
        if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
            continue  # not TCP, or cut short before its TCP header
        tcp = ip.data
        outgoing = ip.src == address
        key = (ip.src, tcp.sport, ip.dst, tcp.dport) if outgoing else (ip.dst, tcp.dport, ip.src, tcp.sport)
        conn = connections.get(key)
        opening = tcp.flags & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK) == dpkt.tcp.TH_SYN  # not a SYN-ACK sent again
        if conn is not None and opening and conn.sent_end is not None:
            ended.append((key, conn))  # a new connection on the same ports: its sequence starts afresh
            conn = None
        if conn is None:
            conn = connections[key] = _Connection(first_s=t, last_s=t)
        payload = ip.len - 4 * ip.hl - 4 * tcp.off  # the capture keeps headers only: lengths from the headers
        if outgoing and payload > 0:
            _sent(conn, t, tcp.seq, payload)
        if not outgoing:
            conn.bytes_in += max(payload, 0)
        conn.last_s = t
    return [
        ConnectionWaits(socket.inet_ntoa(key[2]), conn.first_s, conn.last_s, conn.waits)
        for key, conn in [*ended, *connections.items()]
        if conn.sent_end is not None and conn.sent_end > conn.bytes_in
    ]


def _frames(pcap: Path) -> Iterator[tuple[float, dpkt.ethernet.Ethernet]]:
    """The capture's frames with their times, but for a last record cut short: a capture ended in the middle of
    writing one (tcpdump killed, or a further server's stream cut with its ssh session) holds every frame
    before it whole."""
    with pcap.open("rb") as f:
        try:
            for t, frame in dpkt.pcap.Reader(f):
                yield t, dpkt.ethernet.Ethernet(frame)
        except dpkt.NeedData:  # a record cut short in its header or frame: the last
            return


def host_stalls(pcap: Path, host_ip: str) -> TimerStalls:
    """The timer stalls of the data connections `host_ip` sent, from its own capture."""
    return TimerStalls.of(host_connections(pcap, host_ip))


def _sent(conn: _Connection, t: float, seq: int, payload: int) -> None:
    if conn.sent_end is None:
        conn.first_seq, conn.sent_end = seq, payload
        return
    start = (seq - conn.first_seq) % SEQ_SPACE  # sequence numbers wrap; a connection sends far less than 4 GB
    if start < conn.sent_end and t - conn.last_s >= TCP_RTO_MIN_S:
        conn.waits.append((conn.last_s, t))
    conn.sent_end = max(conn.sent_end, start + payload)


def run_stalls(capture_dir: Path, host_ips: dict[str, str]) -> TimerStalls:
    """Every host's stalls together (each connection counted once, at the capture of the host that sent its
    data)."""
    return TimerStalls.of(
        [c for name, ip in sorted(host_ips.items()) for c in host_connections(capture_dir / f"{name}.pcap", ip)]
    )


def flow_connections(run_dir: Path, capture_dir: Path) -> pd.DataFrame:
    """flows.csv's rows between hosts (an emulated run's, with their `path`), each with its connection as the
    captures (in `capture_dir`) saw it: `connection_s`, its first to its last packet, and `waits`, its timer
    waits in seconds after the run's start. A host pair's rows and connections are paired one to one by when
    they opened, the gaps between the rows' starts and the connections' first packets the least in sum (their
    order, where the counts are equal); connections left over have no row (a killed task's fetch), and where a
    pair has fewer connections than rows its rows get NaN and None."""
    hosts = json.loads((run_dir / "cluster.json").read_text())["hosts"]
    origin = json.loads((run_dir / "summary.json").read_text())["started_at_unix"]
    name_of = {h["ip"]: h["name"] for h in hosts}
    by_pair: dict[tuple[str, str | None], list[ConnectionWaits]] = {}  # (sender, receiver) -> its connections
    for h in hosts:
        for c in host_connections(capture_dir / f"{h['name']}.pcap", h["ip"]):
            by_pair.setdefault((h["name"], name_of.get(c.receiver_ip)), []).append(c)
    flows = pd.read_csv(run_dir / "flows.csv")
    flows = flows[flows.src_host != flows.dst_host].sort_values("start_s", kind="stable")
    parts = []
    for pair, rows in flows.groupby(["src_host", "dst_host"], sort=False):
        conns = by_pair.get(pair, [])
        if len(conns) < len(rows):
            parts.append(rows.assign(connection_s=np.nan, waits=None))
            continue
        firsts = np.array([c.first_s - origin for c in conns])
        _, chosen = linear_sum_assignment(np.abs(rows.start_s.to_numpy()[:, None] - firsts[None, :]))
        conns = [conns[i] for i in chosen]
        spells = [[(a - origin, b - origin) for a, b in c.waits] for c in conns]
        parts.append(
            rows.assign(
                connection_s=[c.last_s - c.first_s for c in conns], waits=pd.Series(spells, rows.index, dtype=object)
            )
        )
    return pd.concat(parts) if parts else flows.assign(connection_s=np.nan, waits=None)


def reducer_waits(connections: pd.DataFrame) -> pd.Series:
    """Per task attempt that moved data over the network (index task_id, attempt), from `flow_connections`:
    the seconds during which at least one of its connections waited for a timer (NaN if any of its
    connections could not be paired)."""

    def union(waits: pd.Series) -> float:
        return np.nan if waits.isna().any() else _covered([spell for spells in waits for spell in spells])

    return connections.groupby(["task_id", "attempt"]).waits.agg(union).rename("timer_wait_s")


def path_waits(connections: pd.DataFrame) -> pd.DataFrame:
    """The paired connections of `flow_connections` by kind and path (rack, eps, ocs or mixed): how many, their
    time summed, their timer waits, the silence before those, its share of their time and the share of it that
    was the timer backed off: whether a run's connections waited over the EPS, over circuits, or both."""
    paired = connections.dropna(subset=["connection_s"])
    paired = paired.assign(
        timer_waits=paired.waits.map(len),
        timer_silence_s=paired.waits.map(lambda w: sum(b - a for a, b in w)),
        backed_off_s=paired.waits.map(lambda w: sum(backed_off(w))),
    )
    table = paired.groupby(["kind", "path"]).agg(
        connections=("connection_s", "size"),
        connection_s=("connection_s", "sum"),
        timer_waits=("timer_waits", "sum"),
        timer_silence_s=("timer_silence_s", "sum"),
        backed_off_s=("backed_off_s", "sum"),
    )
    return table.assign(
        timer_silence_share=table.timer_silence_s / table.connection_s,
        timer_backed_off_share=table.backed_off_s / table.timer_silence_s,
    )


def _covered(spells: list[tuple[float, float]]) -> float:
    """The seconds within at least one of the spells."""
    covered, reach = 0.0, -np.inf
    for start, end in sorted(spells):
        covered += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return covered
