"""A real worker agent (in a network namespace of its own, tasks in real cgroups) told by a scripted
scheduler to suspend and resume, kill, and re-quota and re-pace running tasks, and sharing its host's cores
among tasks that over-commit them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridbed.workers.cgroups import CgroupLayout, CgroupTree
from hybridbed.workers.protocol import Channel

COMPUTE_S = 2.0
BIG_BLOCK = 4_000_000


def start_agent(tmp_path: Path, *options: str) -> Iterator[Channel]:
    """A worker agent connected to this test as its scheduler; yields the channel."""
    layout = CgroupLayout.detect()
    roots = layout.create_task_roots(f"it-preempt-{os.getpid()}")
    socket_path = str(tmp_path / "scheduler.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(socket_path)
    server.listen(1)
    data_dir = tmp_path / "data"
    command = [
        sys.executable,
        "-m",
        "hybridbed.workers.agent",
        "--scheduler-socket",
        socket_path,
        "--host",
        "h0",
        "--rack",
        "0",
        "--ip",
        "127.0.0.1",
        "--slots",
        "4",
        "--cores",
        "4",
        "--memory-mb",
        "4000",
        "--data-dir",
        str(data_dir),
        "--cgroup-roots",
        *map(str, roots),
        "--cgroup-version",
        str(layout.version),
        *options,
    ]
    # its own network namespace: its data server's port and its traffic stay off the machine's loopback
    proc = subprocess.Popen(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "agent", *command])
    server.settimeout(20)
    conn, _ = server.accept()
    channel = Channel(conn)
    assert receive(channel, "register")["host"] == "h0"
    (data_dir / "blocks").mkdir(parents=True, exist_ok=True)
    (data_dir / "blocks" / "b0").write_bytes(b"x" * 1000)
    (data_dir / "blocks" / "big").write_bytes(b"x" * BIG_BLOCK)
    yield channel
    channel.send({"op": "shutdown"})
    proc.wait(timeout=10)
    for root in roots:
        CgroupTree(root).thaw_all()
    for root in roots:
        CgroupTree(root).kill_all(grace_s=0)
        CgroupTree(root).remove()
    server.close()


@pytest.fixture
def agent(tmp_path):
    yield from start_agent(tmp_path)


@pytest.fixture
def agent_with_disk(tmp_path):
    """The agent's host with a disk of 8 Mb/s (1 MB/s) each way."""
    yield from start_agent(tmp_path, "--disk-read-mbps", "8", "--disk-write-mbps", "8")


def receive(channel: Channel, op: str, timeout_s: float = 30) -> dict:
    """The next message of this kind (heartbeats and the like skipped)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = channel.receive()
        assert message is not None, "the agent hung up"
        if message["op"] == op:
            return message
    raise AssertionError(f"no {op} message within {timeout_s:g} s")


def launch(
    channel: Channel, task_id: str, cores: float = 1.0, output_bytes: int = 1000, compute_s: float = COMPUTE_S
) -> dict:
    channel.send(
        {
            "op": "launch",
            "task": {
                "task_id": task_id,
                "attempt": 0,
                "kind": "map",
                "cores": cores,
                "memory_mb": 256,
                "compute_s": compute_s,
                "partitions": [],
                "output_bytes": output_bytes,
                "output_dir": f"out/j/{task_id}.a0",
                "rate_bps": None,
                "disk_read_bps": None,
                "disk_write_bps": None,
                "input": {"path": "blocks/b0", "sources": []},
            },
        }
    )
    return receive(channel, "started")


def fetch_big_block(channel: Channel, task_id: str, output_bytes: int, rate_bps: float | None) -> dict:
    """A reducer launched to fetch BIG_BLOCK from this host's m0 (its data server), held to `rate_bps` (None:
    uncapped), and then told of the block: its started message."""
    channel.send(
        {
            "op": "launch",
            "task": {
                "task_id": task_id,
                "attempt": 0,
                "kind": "reduce",
                "cores": 1.0,
                "memory_mb": 256,
                "compute_s": 0.1,
                "partitions": [],
                "output_bytes": output_bytes,
                "output_dir": f"out/j/{task_id}.a0",
                "rate_bps": rate_bps,
                "disk_read_bps": None,
                "disk_write_bps": None,
                "n_sources": 1,
                "seed": 1,
            },
        }
    )
    started = receive(channel, "started")
    notice = {"source": "m0", "host": "h0", "ip": "127.0.0.1", "path": "blocks/big", "bytes": BIG_BLOCK}
    channel.send({"op": "notice", "key": f"{task_id}.a0", "notice": notice})
    return started


def test_a_suspended_task_resumes_where_it_was_after_the_overhead(agent):
    started = launch(agent, "t0")
    freezer = Path(started["cgroups"][-1])
    time.sleep(0.5)
    agent.send({"op": "suspend", "key": "t0.a0"})
    time.sleep(0.3)
    state = (
        (freezer / "freezer.state").read_text().strip()
        if (freezer / "freezer.state").exists()
        else (freezer / "cgroup.events").read_text()
    )
    assert state == "FROZEN" or "frozen 1" in state
    time.sleep(1.7)
    agent.send({"op": "resume", "key": "t0.a0", "overhead_s": 0.5})
    finished = receive(agent, "finished")
    took = finished["time"] - started["time"]
    # 2 s of compute, 2 s suspended, 0.5 s of recovery: had it kept counting while frozen, 2 s in all
    assert 4.2 <= took <= 5.5, took


def test_a_killed_task_ends_at_once_even_when_frozen(agent):
    started = launch(agent, "t1")
    agent.send({"op": "suspend", "key": "t1.a0"})
    time.sleep(0.3)
    agent.send({"op": "kill", "key": "t1.a0"})
    failed = receive(agent, "failed")
    assert failed["task_id"] == "t1" and failed["exit_code"] != 0
    assert failed["time"] - started["time"] < 1.5


def test_a_task_given_half_its_cores_computes_at_half_the_pace(agent):
    started = launch(agent, "t2")
    agent.send({"op": "share", "key": "t2.a0", "share": {"cores": 0.5}})
    finished = receive(agent, "finished")
    took = finished["time"] - started["time"]
    assert 3.6 <= took <= 4.8, took  # 2 s of work at half pace (the share arrives a moment after the start)


def cpu_quota_cores(cgroup: Path) -> float:
    if (cgroup / "cpu.cfs_quota_us").exists():
        return int((cgroup / "cpu.cfs_quota_us").read_text()) / int((cgroup / "cpu.cfs_period_us").read_text())
    quota, period = (cgroup / "cpu.max").read_text().split()
    return int(quota) / int(period)


def test_tasks_over_committing_the_hosts_cores_share_them_and_a_frozen_one_leaves_its_share(agent):
    """Two 4-core tasks on the agent's 4-core host: each gets 2 cores (its quota and its pace) while both
    compute. Suspending one after 1 s gives the other all 4: it has done 0.5 s of its 2 s by then and takes
    1.5 s more, so 2.5 s in all (alone 2 s; sharing throughout 4 s)."""
    first, second = launch(agent, "t4", cores=4.0), launch(agent, "t5", cores=4.0)
    time.sleep(0.5)
    assert [cpu_quota_cores(Path(s["cgroups"][0])) for s in (first, second)] == [2.0, 2.0]
    time.sleep(0.5)
    agent.send({"op": "suspend", "key": "t4.a0"})
    finished = receive(agent, "finished")
    assert finished["task_id"] == "t5"
    took = finished["time"] - second["time"]
    assert 2.3 <= took <= 3.2, took
    agent.send({"op": "resume", "key": "t4.a0", "overhead_s": 0.0})
    assert receive(agent, "finished")["task_id"] == "t4"


def test_tasks_writing_at_once_share_the_hosts_disk(agent_with_disk):
    """Two maps writing 3 MB each, unpaced by their allotments, on a host whose disk writes 1 MB/s: each
    gets half while both write, so the last ends after about 6 s (6 MB at 1 MB/s) and the first, which may
    have begun up to a second earlier and had the disk to itself meanwhile, after 5 to 6 s; alone a map would
    take 3 s, and with no host disk a few milliseconds."""
    started = [launch(agent_with_disk, f"w{i}", output_bytes=3_000_000, compute_s=0.1) for i in range(2)]
    took = sorted(receive(agent_with_disk, "finished")["time"] - started[0]["time"] for _ in started)
    assert took[0] >= 4.5 and 5.8 <= took[1] <= 7.0, took


def test_heartbeats_report_the_disk_bandwidth_in_use(agent_with_disk):
    """What Tetris's resource tracker reads: while an unpaced map writes 3 MB, the host's whole disk (8 Mb/s)
    is given to it; once it is done, none."""
    launch(agent_with_disk, "w", output_bytes=3_000_000, compute_s=0.1)
    writing = []
    while (message := agent_with_disk.receive())["op"] != "finished":
        if message["op"] == "heartbeat":
            writing.append(message["disk_write_mbps"])
    assert max(writing) == pytest.approx(8.0)
    assert receive(agent_with_disk, "heartbeat")["disk_write_mbps"] == 0.0
    assert receive(agent_with_disk, "heartbeat")["disk_read_mbps"] == 0.0


def test_what_the_data_server_reads_for_another_host_shares_the_disk(agent_with_disk):
    """A reducer fetching 4 MB from the host (no network cap) is held to the disk's 1 MB/s: about 4 s."""
    channel = agent_with_disk
    started = fetch_big_block(channel, "t6", output_bytes=0, rate_bps=None)
    took = receive(channel, "finished")["time"] - started["time"]
    assert 3.6 <= took <= 5.5, took


def test_a_fetch_under_way_slows_to_a_new_network_share(agent):
    """A reducer fetching 4 MB over real TCP (its sender paced at 1 MB/s: 4 s) is given half that rate after
    about 0.5 s: the rest, at 0.5 MB/s at its receiving side, takes about 7 s more."""
    channel = agent
    started = fetch_big_block(channel, "t3", output_bytes=1000, rate_bps=8e6)
    time.sleep(0.5)
    channel.send({"op": "share", "key": "t3.a0", "share": {"cores": 1.0, "rate_bps": 4e6}})
    finished = receive(channel, "finished")
    took = finished["time"] - started["time"]
    assert 6.5 <= took <= 9.5, took  # unchanged it would take about 4 s


def test_stored_blocks_are_on_the_hosts_disk_when_it_says_so(agent, tmp_path):
    blocks = [{"path": "blocks/s1", "bytes": 3000}, {"path": "blocks/s2", "bytes": 5}]
    agent.send({"op": "store", "job": "j1", "blocks": blocks})
    assert {k: v for k, v in receive(agent, "stored").items() if k != "op"} == {"host": "h0", "job": "j1"}
    blocks = tmp_path / "data" / "blocks"
    assert (blocks / "s1").stat().st_size == 3000 and (blocks / "s2").stat().st_size == 5
