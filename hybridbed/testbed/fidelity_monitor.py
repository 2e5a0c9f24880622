"""The fidelity monitor: beside every emulated run, samples what the machine and the shaped links actually
did, cheaply (counters, never packets), into fidelity.csv.

Every SAMPLE_INTERVAL_S it reads the machine's CPU use (psutil) and the traffic-control statistics of every
shaped switch port in the run's namespace (`qdisc show`, asked of one `tc -batch` kept running): bytes sent,
the queue standing at that moment and drops. It reads the queues about every QUEUE_READ_S in between too, and
keeps the smallest each held: a link whose queue stood at every reading of an interval was busy all along, so
what it sent then is what it could send, and its achieved rate over its configured rate says whether the
shaping held. The two ends alone do not show it: paced connections reach a port in bursts every few hundred
milliseconds, and readings every half second fell into step with them, catching a queue at both ends of
intervals in which the port sent its bursts at its rate and idled in between (docs/network.md, "Reading
the fidelity verdict").
It also reads the ports' packet counters (/proc/net/dev): every packet a switch port receives leaves by
another port or is dropped at a shaped queue, so what is missing from the sums was lost inside the datapath.
And it reads the kernel's scheduler statistics of the thread that forwards the packets (Open vSwitch's main
thread, in the userspace datapath): the CPU it used and the time it was ready to run but had no CPU. The
machine's CPU use does not show a datapath starved by a quota or by processes it competes with for one core;
its own wait does, as it happens (docs/network.md, "Reading the fidelity verdict"). At each reading of the
queues it also reads what waits in the receive queues of the run's packet sockets (/proc/net/packet: those the
userspace datapath reads the switch ports through), and keeps the smallest: packets that waited at every reading
of an interval waited for the forwarding thread all along, while the links downstream of it sent what little it
handed them (their queues do not show it).

At its start and stop it also reads every emulated host's TCP counters (segments sent and retransmitted,
timeouts, reordering, from /proc/<pid>/net/snmp and netstat of a process in the host's namespace): the
simulator's transfers are fluid, so what TCP had to send again, and why, is what the emulated transfers lost
to loss recovery.

The monitor counts its own cost (its thread's CPU and that of the `tc` it reads the queues through) so that a
run can say what watching it took.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import random
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from hybridbed.config.fabric import FabricSpec
from hybridbed.testbed.ovs import queued_packet_bytes
from hybridbed.testbed.shaping import shaped_ports

SAMPLE_INTERVAL_S = 0.5  # fidelity.csv's intervals: a row per port every half second
# Between two readings of the queues within an interval, drawn from 0.5-1.5x of it so that the readings cannot
# fall into step with senders that burst periodically. A port between bursts is idle for most of their period
# (a 10 Mb/s port sends a 20-frame burst in 24 ms), so a few readings find its queue empty. At this spacing the
# monitor takes 1.7 % of a core on the quickstart, asking one running `tc` (QdiscReader); starting a `tc` per
# reading (about 3 ms of CPU each) it took 4.4-5.0 %, measured in turn (docs/network.md).
QUEUE_READ_S = 0.1
FIDELITY_FIELDS = [
    "time_s",
    "interval_s",
    "cpu_busy_pct",
    "forwarding_cpu_share",  # seconds the forwarding thread ran per second of the interval (empty: not watched)
    "forwarding_wait_share",  # seconds it was ready to run and had no CPU, per second of the interval
    # the least the datapath's packet sockets held waiting for that thread at the readings (empty: not watched)
    "forwarding_backlog_min_bytes",
    "link",
    "link_class",
    "configured_mbps",
    "achieved_mbps",
    "backlog_start_bytes",
    "backlog_end_bytes",
    "backlog_min_bytes",
    "drops",
    "received_packets",
    "sent_packets",
]


# The TCP counters read from a host's namespace: what its connections sent, sent again, and why.
# `retransmitted` counts every retransmission the stack tried, the fast and slow-start ones only those that
# left it; `retransmit_failures` are the tries the host's own egress queue refused.
TCP_COUNTERS = {
    "segments_sent": ("Tcp", ("OutSegs",)),
    "retransmitted": ("Tcp", ("RetransSegs",)),
    "timeouts": ("TcpExt", ("TCPTimeouts",)),  # retransmission timeouts
    "spurious_timeouts": ("TcpExt", ("TCPSpuriousRTOs",)),  # timeouts F-RTO found needless
    "fast_retransmits": ("TcpExt", ("TCPFastRetrans",)),  # in loss recovery (SACK, duplicate ACKs, RACK)
    "slow_start_retransmits": ("TcpExt", ("TCPSlowStartRetrans",)),  # after a timeout, the window again
    "loss_probes": ("TcpExt", ("TCPLossProbes",)),  # tail loss probes
    "syn_retransmits": ("TcpExt", ("TCPSynRetrans",)),  # connection set-up
    "retransmit_failures": ("TcpExt", ("TCPRetransFail",)),
    "reorderings": ("TcpExt", ("TCPSACKReorder", "TCPTSReorder", "TCPRenoReorder")),  # reordering detected
    "dsacks_received": ("TcpExt", ("TCPDSACKRecv",)),  # the receiver had the retransmitted data already
}


def parse_proc_counters(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/snmp or /proc/net/netstat as {group: {counter: value}} (each group is a line of names and a
    line of values)."""
    groups: dict[str, dict[str, int]] = {}
    lines = [line.split() for line in text.splitlines() if line.strip()]
    for names, values in zip(lines[::2], lines[1::2]):
        groups[names[0].rstrip(":")] = {name: int(value) for name, value in zip(names[1:], values[1:])}
    return groups


def tcp_counters(snmp: str, netstat: str) -> dict[str, int]:
    """The counters of TCP_COUNTERS from the texts of /proc/net/snmp and /proc/net/netstat."""
    groups = {**parse_proc_counters(snmp), **parse_proc_counters(netstat)}
    return {name: sum(groups[group].get(f, 0) for f in fields) for name, (group, fields) in TCP_COUNTERS.items()}


def read_tcp_counters(pid: int) -> dict[str, int] | None:
    """The TCP counters of the network namespace process `pid` is in; None once it is gone."""
    try:
        return tcp_counters(*(Path(f"/proc/{pid}/net/{name}").read_text() for name in ("snmp", "netstat")))
    except OSError:
        return None


@dataclass(frozen=True)
class ThreadTimes:
    """A thread's time on a CPU and its time ready to run with none free (its run delay), in seconds."""

    cpu_s: float
    waiting_s: float


def parse_schedstat(text: str) -> ThreadTimes:
    """A thread's /proc/<pid>/task/<tid>/schedstat: nanoseconds on a CPU, nanoseconds waiting on a run queue, and
    the time slices it ran."""
    on_cpu, waiting, _ = text.split()
    return ThreadTimes(int(on_cpu) / 1e9, int(waiting) / 1e9)


def read_main_thread_times(pid: int) -> ThreadTimes | None:
    """The scheduler's times of process `pid`'s main thread; None once it is gone (or where the kernel keeps no
    such statistics)."""
    try:
        return parse_schedstat(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text())
    except OSError:
        return None


@dataclass(frozen=True)
class QdiscCounters:
    bytes_sent: int
    backlog_bytes: int
    drops: int


@dataclass(frozen=True)
class PortPackets:
    received: int
    sent: int


def parse_net_dev(text: str) -> dict[str, PortPackets]:
    """Packets received and sent per interface, from the text of /proc/net/dev."""
    counters = {}
    for line in text.splitlines()[2:]:  # two header lines
        name, _, fields = line.partition(":")
        values = fields.split()  # receive: bytes packets errs drop fifo frame compressed multicast; transmit: ...
        counters[name.strip()] = PortPackets(received=int(values[1]), sent=int(values[9]))
    return counters


def parse_qdiscs(tc_json: str) -> dict[str, QdiscCounters]:
    """The root qdisc's counters per interface from `tc -s -j qdisc show` (HTB's root sums its children)."""
    counters = {}
    for qdisc in json.loads(tc_json):
        if qdisc.get("root"):
            counters[qdisc["dev"]] = QdiscCounters(
                int(qdisc.get("bytes", 0)), int(qdisc.get("backlog", 0)), int(qdisc.get("drops", 0))
            )
    return counters


class QdiscReader:
    """Every qdisc's counters in the namespace it was made in, read through one `tc -s -j -batch -` that lives
    as long as the reader: a `tc` per reading took about 3 ms of CPU (most of it starting the program), which at
    ten readings a second came to most of the monitor's own cost; a command to a running `tc` takes a tenth of
    a millisecond. `tc` answers each command with one line (a JSON array) and stops at the first error; the
    next reading then starts another. Its CPU is counted when it ends."""

    command = ("tc", "-s", "-j", "-batch", "-")

    def __init__(self) -> None:
        self._tc: subprocess.Popen[bytes] | None = None
        self.cpu_s = 0.0  # the CPU of the `tc` processes ended so far

    def read(self) -> dict[str, QdiscCounters]:
        """The root qdiscs' counters per interface now ({} if `tc` failed)."""
        if self._tc is None:
            self._tc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        assert self._tc.stdin is not None and self._tc.stdout is not None
        answer = b""
        with contextlib.suppress(BrokenPipeError):  # `tc` ended
            self._tc.stdin.write(b"qdisc show\n")
            self._tc.stdin.flush()
            while not answer.endswith(b"\n"):
                chunk = os.read(self._tc.stdout.fileno(), 1 << 16)
                if not chunk:  # `tc` ended
                    break
                answer += chunk
        if not answer.endswith(b"\n"):
            self.close()
            return {}
        return parse_qdiscs(answer.decode())

    def close(self) -> None:
        """End the `tc` (it ends at the end of its input) and count its CPU; idempotent."""
        tc, self._tc = self._tc, None
        if tc is None:
            return
        assert tc.stdin is not None and tc.stdout is not None
        with contextlib.suppress(BrokenPipeError):  # (it ended already)
            tc.stdin.close()
        tc.stdout.close()
        _, status, usage = os.wait4(tc.pid, 0)
        tc.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s += usage.ru_utime + usage.ru_stime


class FidelityMonitor:
    """Samples into `path` from start() until stop(); times are seconds after `origin_unix`. Must be started
    from a thread inside the run's network namespace (its thread, and the `tc` it runs, inherit it).
    `host_pids`: a process in each emulated host's namespace (its shell), whose TCP counters to read;
    `forwarding_pid`: the process whose main thread forwards the packets (None: the kernel forwards them)."""

    def __init__(
        self,
        fabric: FabricSpec,
        path: Path,
        host_pids: dict[str, int],
        forwarding_pid: int | None,
        interval_s: float = SAMPLE_INTERVAL_S,
    ):
        self.ports = {p.interface: p for p in shaped_ports(fabric)}
        self.host_pids = host_pids
        self.forwarding_pid = forwarding_pid
        self.tcp: dict[str, int] = {}  # TCP_COUNTERS summed over the hosts, from start() to stop()
        self.path = path
        self.interval_s = interval_s
        self.own_cpu_s = 0.0  # the sampling thread's CPU and its tc's
        self._qdiscs = QdiscReader()  # its `tc` starts at the first reading, in the sampling thread's namespace
        self.watched_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._origin = 0.0

    def start(self, origin_unix: float) -> None:
        self._origin = origin_unix
        self._thread = threading.Thread(target=self._run, name="fidelity-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Take the last sample and stop (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _read_tcp(self) -> dict[str, dict[str, int]]:
        return {host: seen for host, pid in self.host_pids.items() if (seen := read_tcp_counters(pid)) is not None}

    @property
    def cpu_share_of_a_core(self) -> float:
        """The monitor's own cost: CPU seconds per second watched."""
        return self.own_cpu_s / self.watched_s if self.watched_s else 0.0

    def _read_forwarding(self) -> ThreadTimes | None:
        return None if self.forwarding_pid is None else read_main_thread_times(self.forwarding_pid)

    @staticmethod
    def _read_packets() -> dict[str, PortPackets]:
        return parse_net_dev(Path("/proc/thread-self/net/dev").read_text())  # the run's namespace: this thread's

    def _read_datapath_backlog(self) -> int | None:
        """Bytes waiting for the forwarding thread in the run's packet sockets (None: the kernel forwards)."""
        if self.forwarding_pid is None:
            return None
        return queued_packet_bytes(Path("/proc/thread-self/net/packet").read_text())

    def _read_qdiscs(self) -> dict[str, QdiscCounters]:
        return self._qdiscs.read()

    def _run(self) -> None:
        thread_cpu, started = time.thread_time(), time.monotonic()
        try:
            self._sample()
        finally:
            self._qdiscs.close()
            self.own_cpu_s += time.thread_time() - thread_cpu + self._qdiscs.cpu_s
            self.watched_s = time.monotonic() - started

    def _sample(self) -> None:
        """Write fidelity.csv's rows until stopped, then read the hosts' TCP counters again."""
        psutil.cpu_percent(interval=None)  # opens the first interval
        before, before_t, packets_before = self._read_qdiscs(), time.time(), self._read_packets()
        lowest = {interface: counters.backlog_bytes for interface, counters in before.items()}
        datapath_lowest = self._read_datapath_backlog()
        tcp_before, forwarding_before = self._read_tcp(), self._read_forwarding()
        row_due = time.monotonic() + self.interval_s
        with self.path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIDELITY_FIELDS)
            writer.writeheader()
            while True:
                to_row = row_due - time.monotonic()
                stopping = self._stop.wait(max(0.0, min(to_row, random.uniform(0.5, 1.5) * QUEUE_READ_S)))
                now_counters = self._read_qdiscs()
                for interface, counters in now_counters.items():
                    lowest[interface] = min(lowest.get(interface, counters.backlog_bytes), counters.backlog_bytes)
                datapath_now = self._read_datapath_backlog()
                if datapath_now is not None and datapath_lowest is not None:  # (both None: the kernel forwards)
                    datapath_lowest = min(datapath_lowest, datapath_now)
                if not stopping and time.monotonic() < row_due:
                    continue
                now_t, packets_now = time.time(), self._read_packets()
                cpu = psutil.cpu_percent(interval=None)
                forwarding_now = self._read_forwarding()
                seconds = now_t - before_t
                forwarding = _forwarding_columns(forwarding_before, forwarding_now, seconds)
                for interface, port in self.ports.items():
                    a, b = before.get(interface), now_counters.get(interface)
                    pa, pb = packets_before.get(interface), packets_now.get(interface)
                    if a is None or b is None or pa is None or pb is None or seconds <= 0:
                        continue
                    writer.writerow(
                        {
                            "time_s": round(now_t - self._origin, 3),
                            "interval_s": round(seconds, 3),
                            "cpu_busy_pct": cpu,
                            **forwarding,
                            "forwarding_backlog_min_bytes": datapath_lowest,
                            "link": interface,
                            "link_class": port.link_class,
                            "configured_mbps": port.configured_mbps,
                            "achieved_mbps": round((b.bytes_sent - a.bytes_sent) * 8 / seconds / 1e6, 4),
                            "backlog_start_bytes": a.backlog_bytes,
                            "backlog_end_bytes": b.backlog_bytes,
                            "backlog_min_bytes": lowest.get(interface, 0),
                            "drops": b.drops - a.drops,
                            "received_packets": pb.received - pa.received,
                            "sent_packets": pb.sent - pa.sent,
                        }
                    )
                f.flush()
                before, before_t, packets_before = now_counters, now_t, packets_now
                forwarding_before = forwarding_now
                lowest = {interface: counters.backlog_bytes for interface, counters in now_counters.items()}
                datapath_lowest = datapath_now
                row_due = time.monotonic() + self.interval_s
                if stopping:
                    break
        watched = [(tcp_before[host], end) for host, end in self._read_tcp().items() if host in tcp_before]
        if watched:
            self.tcp = {name: sum(end[name] - begin[name] for begin, end in watched) for name in TCP_COUNTERS}


def _forwarding_columns(
    before: ThreadTimes | None, after: ThreadTimes | None, seconds: float
) -> dict[str, float | None]:
    """fidelity.csv's forwarding columns for an interval of `seconds` between two readings (None: not read)."""
    if before is None or after is None or seconds <= 0:
        return {"forwarding_cpu_share": None, "forwarding_wait_share": None}
    return {
        "forwarding_cpu_share": round((after.cpu_s - before.cpu_s) / seconds, 4),
        "forwarding_wait_share": round((after.waiting_s - before.waiting_s) / seconds, 4),
    }


class ServerPart(Protocol):
    """A further server's part of the run, as the monitor asks it (testbed/remote.py's RemoteServer)."""

    def request(self, op: str, timeout_s: float = ..., **fields: object) -> dict: ...


class FabricMonitor:
    """The fidelity monitor on every server of a run: this machine's, and one in each further server's part
    (each watches the switch ports and hosts on its server), whose samples join this machine's file when
    they stop. On one machine it is that machine's FidelityMonitor alone."""

    def __init__(
        self,
        fabric: FabricSpec,
        path: Path,
        host_pids: list[dict[str, int]],
        forwarding_pid: int | None,
        parts: Sequence[ServerPart] = (),
    ):
        """`host_pids[k]`: a process in each emulated host's namespace on server k (0: this machine);
        `forwarding_pid`: this machine's forwarding process (None: the kernel datapath, on every server)."""
        self.fabric = fabric
        self.path = path
        self.local = FidelityMonitor(fabric, path, host_pids[0], forwarding_pid)
        self.parts = list(zip(parts, host_pids[1:]))
        self.tcp: dict[str, int] = {}
        self._further_cpu_shares: list[float] = []  # each answering further server's monitor's own cost

    @property
    def cpu_share_of_a_core(self) -> float:
        """The monitors' own cost: the largest of the servers' (each competes with its own server's datapath)."""
        return max([self.local.cpu_share_of_a_core, *self._further_cpu_shares])

    def start(self, origin_unix: float) -> None:
        self.local.start(origin_unix)
        fabric = self.fabric.model_dump(mode="json")
        for part, pids in self.parts:
            part.request(
                "monitor_start",
                fabric=fabric,
                host_pids=pids,
                origin_unix=origin_unix,
                watch_forwarding=self.local.forwarding_pid is not None,  # as this machine does
            )

    def stop(self) -> None:
        """Stop every monitor; a further server's samples go below this machine's in the one file (a server
        that does not answer leaves its links unjudged)."""
        self.local.stop()
        self.tcp = dict(self.local.tcp)
        for part, _ in self.parts:
            try:
                answer = part.request("monitor_stop")
            except (RuntimeError, OSError):
                continue
            rows = answer["samples"].splitlines(keepends=True)[1:]  # below this machine's header
            with self.path.open("a") as f:
                f.writelines(rows)
            for name, value in answer["tcp"].items():
                self.tcp[name] = self.tcp.get(name, 0) + value
            self._further_cpu_shares.append(answer["cpu_share"])
