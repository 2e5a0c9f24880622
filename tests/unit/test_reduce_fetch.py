"""A reducer's fetch loop without a network: one connection per host, a failed connection from a live
host is tried again after its host's penalty, a connection fails at Hadoop's shuffle timeouts, a block read
at HDFS's."""

from __future__ import annotations

import json
import queue
import time

from hybridbed.config.constants import HDFS_READ_TIMEOUT_S, SHUFFLE_READ_TIMEOUT_S
from hybridbed.workers import shuffle as shuffle_module
from hybridbed.workers import task as task_module
from hybridbed.workers.fetch import Fetch, FetchError


def instant_task(**fields: object) -> dict:
    """A task's message with no compute and a 10-byte output, plus `fields` (its sources or its input block)."""
    return {
        "task_id": "j0-r0",
        "attempt": 0,
        "compute_s": 0,
        "compute_mode": "sleep",
        "output_dir": "out",
        "partitions": [],
        "output_bytes": 10,
        **fields,
    }


def test_a_stalled_connection_is_retried_after_its_hosts_penalty_and_a_host_serves_its_outputs_on_one(
    tmp_path, monkeypatch, capsys
):
    connections: list[tuple[str, list[str]]] = []
    timeouts: set[float] = set()
    tried_h2: list[float] = []

    def flaky_fetch(ip, paths, rate_bps, pacer, *, timeout_s, dscp=None):
        connections.append((ip, paths))
        timeouts.add(timeout_s)
        if ip == "10.0.0.2":
            tried_h2.append(time.monotonic())
            if len(tried_h2) < 3:
                raise FetchError("timed out")
        return Fetch(ip, paths, 100 * len(paths), 0.0, 0.1, [(0.1, 100 * len(paths))])

    monkeypatch.setattr(task_module, "fetch", flaky_fetch)
    monkeypatch.setattr(shuffle_module, "PENALTY_S", 0.1)  # Hadoop's 10 s, a hundredth: 0.13 s, then 0.169 s
    notices: queue.Queue[dict] = queue.Queue()
    for index, host in enumerate(["h1", "h1", "h2"]):
        ip = f"10.0.0.{host[1]}"
        notices.put({"source": f"m{index}", "ip": ip, "host": host, "path": f"m{index}"})
    reduce = instant_task(n_sources=3, seed=1)
    totals = task_module.run_reduce(reduce, tmp_path, notices, task_module.Speed(1.0), task_module.Rates(reduce))
    assert totals["fetched_bytes"] == 300
    assert connections.count(("10.0.0.1", ["m0", "m1"])) == 1  # both of h1's outputs over one connection
    assert connections.count(("10.0.0.2", ["m2"])) == 3  # h2 failed twice, then was tried again
    waits = [later - earlier for earlier, later in zip(tried_h2, tried_h2[1:])]
    assert waits[0] >= shuffle_module.penalty_s(1) and waits[1] >= shuffle_module.penalty_s(2)  # its penalties
    assert capsys.readouterr().out.count('"kind": "shuffle"') == 2  # a record per successful connection
    assert timeouts == {SHUFFLE_READ_TIMEOUT_S}  # mapreduce.reduce.shuffle.read.timeout, not HDFS's


def test_a_map_reads_its_block_from_the_next_replica_when_one_fails_at_hdfs_timeout(tmp_path, monkeypatch, capsys):
    tried: list[tuple[str, float]] = []

    def first_replica_down(ip, paths, rate_bps, pacer, *, timeout_s, dscp=None):
        tried.append((ip, timeout_s))
        if ip == "10.0.0.1":
            raise FetchError("timed out")
        return Fetch(ip, paths, 500, 0.0, 0.1, [(0.1, 500)])

    monkeypatch.setattr(task_module, "fetch", first_replica_down)
    block = {"path": "blocks/b0", "sources": [{"ip": "10.0.0.1", "host": "h1"}, {"ip": "10.0.0.2", "host": "h2"}]}
    map_task = instant_task(input=block)
    totals = task_module.run_map(map_task, tmp_path, task_module.Speed(1.0), task_module.Rates(map_task))
    assert totals["read_remote_bytes"] == 500 and totals["read_local_bytes"] == 0
    assert tried == [("10.0.0.1", HDFS_READ_TIMEOUT_S), ("10.0.0.2", HDFS_READ_TIMEOUT_S)]
    assert '"src_host": "h2"' in capsys.readouterr().out


def test_a_broken_connection_keeps_the_outputs_it_copied_whole_and_fetches_only_the_rest(tmp_path, monkeypatch, capsys):
    connections: list[list[str]] = []

    def breaks_after_one_output(ip, paths, rate_bps, pacer, *, timeout_s, dscp=None):
        connections.append(paths)
        if len(connections) == 1:
            raise FetchError("timed out", Fetch(ip, paths[:1], 100, 0.0, 0.1, [(0.1, 100)]))
        return Fetch(ip, paths, 100 * len(paths), 0.2, 0.3, [(0.3, 100 * len(paths))])

    monkeypatch.setattr(task_module, "fetch", breaks_after_one_output)
    monkeypatch.setattr(shuffle_module, "PENALTY_S", 0.01)
    notices: queue.Queue[dict] = queue.Queue()
    for source in ("m0", "m1"):
        notices.put({"source": source, "ip": "10.0.0.1", "host": "h1", "path": source})
    reduce = instant_task(n_sources=2, seed=1)
    totals = task_module.run_reduce(reduce, tmp_path, notices, task_module.Speed(1.0), task_module.Rates(reduce))
    assert connections == [["m0", "m1"], ["m1"]]  # m0 was copied whole before the connection broke
    assert totals["fetched_bytes"] == 200
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    shuffled = [r["sources"] for r in records if r.get("kind") == "shuffle"]
    assert shuffled == [["m0"], ["m1"]]  # each output reported once, m0 with the broken connection's bytes
