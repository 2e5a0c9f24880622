"""The fidelity monitor of a fabric spread over servers: each further server's samples and TCP counters join
this machine's. The further servers are stand-ins that answer as a run's part does."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import time

import pandas as pd
import psutil

from hybridbed.config.fabric import FabricSpec
from hybridbed.testbed.fidelity_monitor import (
    FIDELITY_FIELDS,
    FabricMonitor,
    FidelityMonitor,
    PortPackets,
    QdiscCounters,
    QdiscReader,
    ThreadTimes,
    parse_qdiscs,
    parse_schedstat,
)


class _Part:
    """Answers `monitor_start` and `monitor_stop` with one sample of its ToR's uplink, as a part would."""

    def __init__(self, link: str, retransmitted: int, answers: bool = True, cpu_share: float = 0.01):
        self.link, self.retransmitted, self.answers, self.cpu_share = link, retransmitted, answers, cpu_share
        self.asked: list[tuple[str, dict]] = []

    def request(self, op: str, timeout_s: float = 30.0, **fields: object) -> dict:
        self.asked.append((op, fields))
        if op == "monitor_stop" and not self.answers:
            raise RuntimeError("server 192.0.2.2: the run's part there did not answer")
        if op != "monitor_stop":
            return {"ok": True}
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=FIDELITY_FIELDS)
        writer.writeheader()
        writer.writerow({name: 0 for name in FIDELITY_FIELDS} | {"link": self.link, "link_class": "tor-eps"})
        tcp = {"retransmitted": self.retransmitted}
        return {"ok": True, "samples": out.getvalue(), "tcp": tcp, "cpu_share": self.cpu_share}


def test_each_further_servers_samples_and_tcp_counters_join_this_machines(tmp_path):
    fabric = FabricSpec(racks=6, hosts_per_rack=1)
    parts = [_Part("tor2-eth2", 3, cpu_share=0.5), _Part("tor4-eth2", 4), _Part("tor5-eth2", 5, answers=False)]
    path = tmp_path / "fidelity.csv"
    pids = [{}, {"r2h0": 11}, {"r4h0": 12}, {"r5h0": 13}]
    monitor = FabricMonitor(fabric, path, pids, 4242, parts)
    monitor.start(origin_unix=100.0)
    time.sleep(1.0)  # long enough for this machine's monitor's cost to be a share of its time, not of its start
    monitor.stop()
    start = parts[0].asked[0]
    assert start == (
        "monitor_start",
        {
            "fabric": fabric.model_dump(mode="json"),
            "host_pids": {"r2h0": 11},
            "origin_unix": 100.0,
            "watch_forwarding": True,  # each server watches its own forwarding thread, as this one does
        },
    )
    samples = pd.read_csv(path)  # this machine watched no port of its own here (no switches): only its header
    assert list(samples.link) == ["tor2-eth2", "tor4-eth2"]  # the third server did not answer: its links unjudged
    assert monitor.tcp.get("retransmitted") == 7
    assert monitor.cpu_share_of_a_core == 0.5  # the costliest server's monitor (this one's took far less)


class _Bursting(FidelityMonitor):
    """A monitor with no machine to read: every shaped port's queue reads 9084 bytes (a burst), except at the
    first reading after each row (the monitor reads the packet counters once per row), where it has drained
    to 1514 bytes. The readings it took are counted."""

    def __init__(self, fabric: FabricSpec, path):
        super().__init__(fabric, path, {}, None, interval_s=0.4)
        self.readings = 0
        self.row_written = True

    def _read_qdiscs(self) -> dict[str, QdiscCounters]:
        self.readings += 1
        backlog = 1514 if self.row_written else 9084
        self.row_written = False
        return {interface: QdiscCounters(1000 * self.readings, backlog, 0) for interface in self.ports}

    def _read_packets(self) -> dict[str, PortPackets]:  # type: ignore[override]
        self.row_written = True
        return {interface: PortPackets(0, 0) for interface in self.ports}


def test_the_monitor_keeps_the_smallest_queue_it_read_between_an_intervals_ends(tmp_path):
    fabric = FabricSpec(racks=2, hosts_per_rack=1)
    monitor = _Bursting(fabric, tmp_path / "fidelity.csv")
    monitor.start(origin_unix=0.0)
    time.sleep(2.1)
    monitor.stop()
    samples = pd.read_csv(tmp_path / "fidelity.csv")
    assert len(samples) >= 2 * len(monitor.ports)
    # the queue stood at both ends of the intervals, not at the readings between them (every 50-150 ms)
    assert (samples.backlog_min_bytes == 1514).all()
    assert ((samples.backlog_start_bytes == 9084) & (samples.backlog_end_bytes == 9084)).mean() >= 0.5
    assert monitor.readings >= 3 * samples.time_s.nunique()  # two or more between the ends


def test_a_threads_schedstat_gives_its_cpu_time_and_its_wait_for_a_cpu():
    assert parse_schedstat("2500000000 125000000 1234\n") == ThreadTimes(cpu_s=2.5, waiting_s=0.125)


class _NoPorts(FidelityMonitor):
    """A monitor whose ports' counters stand still: what it reads of the forwarding thread is the test."""

    def _read_qdiscs(self) -> dict[str, QdiscCounters]:
        return {interface: QdiscCounters(0, 0, 0) for interface in self.ports}

    def _read_packets(self) -> dict[str, PortPackets]:  # type: ignore[override]
        return {interface: PortPackets(0, 0) for interface in self.ports}


def test_the_monitor_reads_what_the_forwarding_thread_ran_in_each_interval(tmp_path):
    fabric = FabricSpec(racks=2, hosts_per_rack=1)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # a forwarding thread that never idles
    try:
        monitor = _NoPorts(fabric, tmp_path / "fidelity.csv", {}, busy.pid, interval_s=0.4)
        monitor.start(origin_unix=0.0)
        time.sleep(1.7)
        monitor.stop()
    finally:
        busy.kill()
        busy.wait()
    per_interval = pd.read_csv(tmp_path / "fidelity.csv").groupby("time_s").first()
    assert len(per_interval) >= 3
    # a thread that never idles is on a CPU or waiting for one all the time: the two shares add up to the interval
    ran = per_interval.forwarding_cpu_share + per_interval.forwarding_wait_share
    assert ran.between(0.9, 1.1).all(), per_interval
    assert (per_interval.forwarding_cpu_share > 0.1).all(), per_interval


def test_a_monitor_without_a_forwarding_process_leaves_its_columns_empty(tmp_path):
    monitor = _NoPorts(FabricSpec(racks=2, hosts_per_rack=1), tmp_path / "fidelity.csv", {}, None, interval_s=0.3)
    monitor.start(origin_unix=0.0)
    time.sleep(0.7)
    monitor.stop()
    samples = pd.read_csv(tmp_path / "fidelity.csv")
    assert len(samples) and samples.forwarding_cpu_share.isna().all() and samples.forwarding_wait_share.isna().all()


def _children_named(name: str) -> list[psutil.Process]:
    return [child for child in psutil.Process().children() if child.name() == name]


def test_the_qdisc_reader_answers_every_reading_from_one_tc_and_ends_it_when_closed():
    reader = QdiscReader()
    try:
        first, second = reader.read(), reader.read()
        tcs = _children_named("tc")
    finally:
        reader.close()
    one_shot = parse_qdiscs(subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True).stdout.decode())
    assert "lo" in first and set(first) == set(second) == set(one_shot)  # the same qdiscs a `tc` of its own reads
    assert len(tcs) == 1  # both readings asked one `tc`, still running between them
    assert not _children_named("tc")  # ended and reaped


class _EndingAtOnce(QdiscReader):
    command = ("true",)  # a `tc` that stops before answering (as one does at an error)


def test_a_qdisc_reader_whose_tc_ended_reads_nothing_and_leaves_no_process_behind():
    reader = _EndingAtOnce()
    assert reader.read() == {} and reader.read() == {}  # the second reading tried another
    assert not _children_named("true")
