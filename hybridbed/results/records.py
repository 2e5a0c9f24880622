"""Run results written as the run goes: one CSV row per finished job, task and transfer, flushed at once,
so a crash leaves everything up to that moment readable (`summary.py` computes the summary from them)."""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from hybridbed.scheduler.model import Allocation, Job, Task, TaskAction, locality_of

JOB_FIELDS = [
    "job_id",
    "arrival_s",
    "start_s",
    "finish_s",
    "jct_s",
    "recurring",
    "n_maps",
    "n_reduces",
    "input_bytes",
    "shuffle_bytes",
    "output_bytes",
    "wait_s",
    "disorders",
    "deadline_s",
    "met_deadline",
]
TASK_FIELDS = [
    "task_id",
    "job_id",
    "kind",
    "attempt",
    "host",
    "rack",
    "locality",
    "start_s",
    "finish_s",
    "read_local_bytes",
    "read_remote_bytes",
    "fetched_bytes",
    "written_bytes",
    "launch_cores",
    "cpu_s",
    "throttled_s",
]
USAGE_FIELDS = [
    "time_s",
    "host",
    "running_tasks",
    "cpu_percent",
    "rss_mb",
    "io_read_mbps",
    "io_write_mbps",
    "net_in_mbps",
    "net_out_mbps",
    "disk_read_mbps",
    "disk_write_mbps",
]
FLOW_FIELDS = [
    "job_id",
    "task_id",
    "attempt",
    "kind",
    "src_host",
    "dst_host",
    "src_rack",
    "dst_rack",
    "bytes",
    "start_s",
    "end_s",
    "elephant",  # 1: a shuffle connection of an elephant aggregate (marked for the circuits in steering `elephant`)
]
# the emulation's flows.csv: each connection's notes of the bytes it had received (path_accounting.received_column)
EMULATED_FLOW_FIELDS = FLOW_FIELDS + ["received"]
# flows.csv once each flow's path is known: rack, eps, ocs or mixed, and the bytes it sent over a circuit
FLOW_PATH_FIELDS = FLOW_FIELDS + ["path", "ocs_bytes"]
SHARE_FIELDS = ["cores", "disk_read_mbps", "disk_write_mbps", "net_in_mbps"]
ACTION_FIELDS = ["time_s", "task_id", "attempt", "host", "action", *SHARE_FIELDS]  # preemptions and share changes
LINK_FIELDS = ["time_s", "switch", "port", "link", "tx_bytes", "rx_bytes"]  # ToR ports towards the core
ALLOCATION_FIELDS = [
    "time_s",
    "running_tasks",
    "suspended_tasks",
    "pending_tasks",
    "cores_allocated",
    "memory_allocated",
]  # the scheduler's view of the cluster over time


class CsvLog:
    """A CSV file that gets its header once and its rows flushed as they are written (or, given a flush
    interval, at most that many wall-clock seconds later: the simulator writes rows faster than a
    flush per row allows)."""

    def __init__(self, path: Path, fields: list[str], flush_interval_s: float = 0.0):
        self.path = path
        self.fields = fields
        self.flush_interval_s = flush_interval_s
        self._file = path.open("w", newline="")
        self._writer = csv.writer(self._file)
        self._writer.writerow(fields)
        self._file.flush()
        self._flushed = time.monotonic()

    def write(self, row: dict) -> None:
        self.write_values([row.get(k, "") for k in self.fields])

    def write_values(self, values: Sequence) -> None:
        """A row given as its values in the order of `fields` (no dict to build: the simulator writes a flow's
        row this way, some millions per run)."""
        self._writer.writerow(values)
        if time.monotonic() - self._flushed >= self.flush_interval_s:
            self._file.flush()
            self._flushed = time.monotonic()

    def close(self) -> None:
        self._file.close()


def task_row(task: Task, finish_s: float, rack_of: dict[str, int], stats: dict) -> dict:
    """tasks.csv row of a finished attempt; `stats` has the byte counts the attempt reported (and, emulated, the
    CPU time its process used and how long its cgroup's CPU quota held it back)."""
    replicas = task.input_block.replicas if task.input_block else ()
    return {
        "task_id": task.task_id,
        "job_id": task.job_id,
        "kind": task.kind.value,
        "attempt": task.attempt,
        "host": task.host,
        "rack": rack_of[task.host],
        "locality": locality_of(replicas, task.host, rack_of).name.lower(),
        "start_s": round(task.started_s, 3),
        "finish_s": round(finish_s, 3),
        **{k: stats.get(k, 0) for k in ("read_local_bytes", "read_remote_bytes", "fetched_bytes", "written_bytes")},
        "launch_cores": round(task.launch_cores, 4),
        **{k: round(stats[k], 3) if k in stats else "" for k in ("cpu_s", "throttled_s")},
    }


def action_row(action: TaskAction, now: float) -> dict:
    """preemptions.csv: one row per suspension, resumption, kill or share change (with the new share)."""
    share = action.allocation
    return {
        "time_s": round(now, 3),
        "task_id": action.task.task_id,
        "attempt": action.attempt,
        "host": action.host,
        "action": action.action,
        **{k: "" if share is None else round(getattr(share, k), 4) for k in SHARE_FIELDS},
    }


def job_row(job: Job) -> dict:
    spec = job.spec
    deadline = spec.deadline_s
    return {
        "job_id": job.job_id,
        "arrival_s": spec.arrival_s,
        "start_s": round(job.started_s, 3),
        "finish_s": round(job.finished_s, 3),
        "jct_s": round(job.finished_s - spec.arrival_s, 3),
        "recurring": spec.recurring,
        "n_maps": spec.n_maps,
        "n_reduces": spec.n_reduces,
        "input_bytes": spec.input_bytes,
        "shuffle_bytes": spec.shuffle_bytes,
        "output_bytes": spec.output_bytes,
        "wait_s": round(job.waited_s, 3),
        "disorders": job.disorders,
        "deadline_s": "" if deadline is None else round(deadline, 3),
        "met_deadline": "" if deadline is None else job.finished_s <= deadline,
    }


class AllocationTimeline:
    """allocation.csv: what the scheduler has handed out over time (tasks running, suspended, pending; the
    live hosts' cores and memory allocated, as fractions), sampled at most once per `interval_s` of run
    time, a row for each sample that differs from the last row, and the last state at the end."""

    def __init__(self, path: Path, interval_s: float = 1.0):
        self.log = CsvLog(path, ALLOCATION_FIELDS, flush_interval_s=1.0)
        self.interval_s = interval_s
        self._sampled_s = -math.inf
        self._last: Allocation | None = None

    def due(self, now: float) -> bool:
        """Whether a sample is due (callers skip computing the allocation otherwise: it walks every host)."""
        return now >= self._sampled_s + self.interval_s

    def record(self, allocation: Allocation, now: float, final: bool = False) -> None:
        if not self.due(now) and not final:
            return
        self._sampled_s = now
        if allocation != self._last or final:
            self.log.write({"time_s": round(now, 3), **asdict(allocation)})
            self._last = allocation

    def close(self) -> None:
        self.log.close()


@dataclass(frozen=True)
class LinkCounter:
    """A ToR port towards the core: `tor<r>-eps` (the EPS uplink) or `tor<r>-ocs<k>` (an OCS port), with the
    bytes it has sent (up, to the core) and received since the run began."""

    switch: str
    port: int
    link: str
    tx_bytes: int
    rx_bytes: int


class LinkCounterLog:
    """links.csv: every ToR port's counters, sampled at most once per `interval_s` of run time (the
    emulation reads the switches' counters, the simulator its own)."""

    def __init__(self, path: Path, interval_s: float = 1.0):
        self.log = CsvLog(path, LINK_FIELDS, flush_interval_s=1.0)
        self.interval_s = interval_s
        self._last_time = -math.inf

    def due(self, now: float) -> bool:
        return now >= self._last_time + self.interval_s

    def record(self, now: float, counters: list[LinkCounter]) -> None:
        for counter in counters:
            self.log.write({"time_s": round(now, 3), **asdict(counter)})
        self._last_time = now

    def close(self) -> None:
        self.log.close()


def write_plan(out_dir: Path, rows: list[dict]) -> None:
    """plan.csv: the policy's plan so far (offline, and per job as jobs arrive), if it made one; the
    columns are the policy's."""
    if rows:
        plan = CsvLog(out_dir / "plan.csv", list(rows[0]))
        for row in rows:
            plan.write(row)
        plan.close()
