"""Rate caps of a task's transfers, one rule for both backends (the emulation paces the task's
connections at the cap, the simulator holds the task's flows to it).

A task's demand says what it was allocated: a map reads its block at its disk-read rate (at its
network-in rate when the block is on another host), a reducer's fetch connections share its network-in
rate (up to PARALLEL_FETCHES of them at a time, their sum held to the rate), and output is written at
the disk-write rate. A rate of 0 means none was allocated: the transfer takes what it gets. The
scenario's per-task cap, when set, also holds the task's network transfers (per task, as the JobPacker
paper's GENI setup limits each task's bandwidth, §5.1.3: a reducer's connections share it).
"""

from __future__ import annotations

import functools
from dataclasses import replace

from hybridbed.scheduler.model import Resources, StageKind, Task


def transfer_cap_mbps(demand: Resources, kind: str, local: bool, task_cap_mbps: float | None) -> float | None:
    """The cap (Mb/s) of a task's `kind` transfers ("input": its one block read, "shuffle": all its fetch
    connections together, "write"); `local`: from or to the task's own host. None: uncapped."""
    if kind == "input":
        rate = demand.disk_read_mbps if local else (demand.net_in_mbps or demand.disk_read_mbps)
    elif kind == "shuffle":
        rate = demand.net_in_mbps
    elif kind == "write":
        return demand.disk_write_mbps or None
    else:
        raise ValueError(f"unknown transfer kind {kind!r}")
    connection = kind == "shuffle" or not local  # a local block is read from disk, not over a connection
    caps = [c for c in (rate, task_cap_mbps if connection else None) if c]
    return min(caps) if caps else None


def network_cap_mbps(demand: Resources, kind: StageKind, task_cap_mbps: float | None) -> float | None:
    """The cap of a task's network connections together: a map's remote input read, a reducer's fetches."""
    return transfer_cap_mbps(demand, "input" if kind is StageKind.MAP else "shuffle", False, task_cap_mbps)


@functools.lru_cache(maxsize=4096)  # few distinct demands, asked at every decision
def placed_demand(demand: Resources, block_remote: bool) -> Resources:
    """What a map takes on the host it runs on (Tetris §3.1: a task's demands depend on its placement): one
    reading its block there reads the disk and receives nothing over the network; one reading it from
    another host receives it at its read rate and reads no disk here (the block's host serves it,
    `remote_read_load`)."""
    if block_remote:
        return replace(demand, disk_read_mbps=0.0, net_in_mbps=demand.net_in_mbps or demand.disk_read_mbps)
    return replace(demand, net_in_mbps=0.0)


@functools.lru_cache(maxsize=4096)  # few distinct demands, asked at every decision
def remote_read_load(demand: Resources) -> Resources:
    """What a map reading its block from another host takes there: disk reads and network out at the rate
    its read runs at (Tetris allots them at the source, §3.2)."""
    rate = demand.net_in_mbps or demand.disk_read_mbps
    return Resources(0, 0, disk_read_mbps=rate, net_out_mbps=rate)


def expected_duration_s(task: Task) -> float:
    """How long the task takes at its allotted rates, as a profile from earlier runs would say: a root
    task's read, compute and write run together; a task with parents fetches, then computes while writing. A transfer with
    no allotted rate counts as instant."""
    demand = task.demand

    def seconds(size: int, rate_mbps: float) -> float:
        return size * 8 / 1e6 / rate_mbps if rate_mbps > 0 else 0.0

    writing = seconds(task.written_bytes, demand.disk_write_mbps)
    if task.kind is StageKind.MAP:
        reading = seconds(task.input_block.size_bytes if task.input_block else 0, demand.disk_read_mbps)
        return max(task.compute_s, reading, writing)
    return seconds(task.fetch_bytes, demand.net_in_mbps) + max(task.compute_s, writing)
