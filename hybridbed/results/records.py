"""Run results written as the run goes: one CSV row per finished job, task and transfer, flushed at once,
so a crash leaves everything up to that moment readable; the summary is computed from the CSVs."""
from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hybridbed.scheduler.cluster import ClusterState
from hybridbed.scheduler.core import TaskAction
from hybridbed.scheduler.locality import locality_of
from hybridbed.scheduler.model import Job, Task, TaskState
from hybridbed.scheduler.policy import Policy

JOB_FIELDS = ["job_id", "arrival_s", "start_s", "finish_s", "jct_s", "recurring", "n_maps", "n_reduces",
              "input_bytes", "shuffle_bytes", "output_bytes", "wait_s", "disorders", "deadline_s", "met_deadline"]
TASK_FIELDS = ["task_id", "job_id", "kind", "attempt", "host", "rack", "locality", "start_s", "finish_s",
               "read_local_bytes", "read_remote_bytes", "fetched_bytes", "written_bytes"]
USAGE_FIELDS = ["time_s", "host", "running_tasks", "cpu_percent", "rss_mb", "io_read_mbps", "io_write_mbps",
                "net_in_mbps", "net_out_mbps"]
FLOW_FIELDS = ["task_id", "attempt", "kind", "src_host", "dst_host", "src_rack", "dst_rack", "bytes", "start_s", "end_s"]
FLOW_PATH_FIELDS = FLOW_FIELDS + ["path"]  # flows.csv once each flow's path is known
SHARE_FIELDS = ["cores", "disk_read_mbps", "disk_write_mbps", "net_in_mbps"]
ACTION_FIELDS = ["time_s", "task_id", "attempt", "host", "action", *SHARE_FIELDS]  # preemptions and share changes
ALLOCATION_FIELDS = ["time_s", "running_tasks", "suspended_tasks", "pending_tasks", "cores_allocated",
                     "memory_allocated"]  # the scheduler's view of the cluster over time
OCS_EVENT_FIELDS = ["seq", "reason", "requested_s", "dark_from_s", "dark_until_s", "done_s", "configured_delay_ms",
                    "circuits_before", "circuits_after"]


class CsvLog:
    """A CSV file that gets its header once and its rows flushed as they are written (or, given a flush
    interval, at most that many wall-clock seconds later: the simulator writes rows faster than a
    flush per row allows)."""

    def __init__(self, path: Path, fields: list[str], flush_interval_s: float = 0.0):
        self.path = path
        self.fields = fields
        self.flush_interval_s = flush_interval_s
        self._file = path.open("w", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=fields)
        self._writer.writeheader()
        self._file.flush()
        self._flushed = time.monotonic()

    def write(self, row: dict) -> None:
        self._writer.writerow({k: row.get(k, "") for k in self.fields})
        if time.monotonic() - self._flushed >= self.flush_interval_s:
            self._file.flush()
            self._flushed = time.monotonic()

    def close(self) -> None:
        self._file.close()


def task_row(task: Task, finish_s: float, rack_of: dict[str, int], stats: dict) -> dict:
    """tasks.csv row of a finished attempt; `stats` has the byte counts the attempt reported."""
    replicas = task.input_block.replicas if task.input_block else ()
    return {"task_id": task.task_id, "job_id": task.job_id, "kind": task.kind.value, "attempt": task.attempt,
            "host": task.host, "rack": rack_of[task.host], "locality": locality_of(replicas, task.host, rack_of).name.lower(),
            "start_s": round(task.started_s, 3), "finish_s": round(finish_s, 3),
            **{k: stats.get(k, 0) for k in ("read_local_bytes", "read_remote_bytes", "fetched_bytes", "written_bytes")}}


def action_row(action: TaskAction, now: float) -> dict:
    """preemptions.csv: one row per suspension, resumption, kill or share change (with the new share)."""
    share = action.allocation
    return {"time_s": round(now, 3), "task_id": action.task.task_id, "attempt": action.attempt, "host": action.host,
            "action": action.action, **{k: "" if share is None else round(getattr(share, k), 4) for k in SHARE_FIELDS}}


def job_row(job: Job) -> dict:
    spec = job.spec
    deadline = spec.deadline_s
    return {"job_id": job.job_id, "arrival_s": spec.arrival_s, "start_s": round(job.started_s, 3),
            "finish_s": round(job.finished_s, 3), "jct_s": round(job.finished_s - spec.arrival_s, 3),
            "recurring": spec.recurring, "n_maps": spec.n_maps, "n_reduces": spec.n_reduces,
            "input_bytes": spec.input_bytes, "shuffle_bytes": spec.shuffle_bytes, "output_bytes": spec.output_bytes,
            "wait_s": round(job.waited_s, 3), "disorders": job.disorders,
            "deadline_s": "" if deadline is None else round(deadline, 3),
            "met_deadline": "" if deadline is None else job.finished_s <= deadline}


class AllocationTimeline:
    """allocation.csv: what the scheduler has handed out over time (tasks running, suspended, pending; the
    live hosts' cores and memory allocated, as fractions), a row whenever it changed, at most one per
    `interval_s` of run time, and the last state at the end."""

    def __init__(self, path: Path, interval_s: float = 1.0):
        self.log = CsvLog(path, ALLOCATION_FIELDS, flush_interval_s=1.0)
        self.interval_s = interval_s
        self._last_time = -math.inf
        self._last: tuple | None = None

    def record(self, cluster: ClusterState, now: float, final: bool = False) -> None:
        if now < self._last_time + self.interval_s and not final:
            return
        live = [h for h in cluster.hosts.values() if h.alive]
        tasks = [t for h in live for t in h.running.values()]
        suspended = sum(1 for t in tasks if t.state is TaskState.SUSPENDED)
        cores = sum(h.capacity.cores for h in live)
        memory = sum(h.capacity.memory_mb for h in live)
        state = (len(tasks) - suspended, suspended, sum(len(p) for p in cluster.pending.values()),
                 round(sum(h.used.cores for h in live) / cores, 4) if cores else 0.0,
                 round(sum(h.used.memory_mb for h in live) / memory, 4) if memory else 0.0)
        if state != self._last or final:
            self.log.write({"time_s": round(now, 3), **dict(zip(ALLOCATION_FIELDS[1:], state))})
            self._last, self._last_time = state, now

    def close(self) -> None:
        self.log.close()


def write_plan(out_dir: Path, policy: Policy) -> None:
    """plan.csv: the policy's plan so far (offline, and per job as jobs arrive), if it made one; the
    columns are the policy's."""
    rows = policy.plan_rows()
    if rows:
        plan = CsvLog(out_dir / "plan.csv", list(rows[0]))
        for row in rows:
            plan.write(row)
        plan.close()


def add_uplink_totals(out_dir: Path, eps_bytes: int, ocs_bytes: int, reconfigurations: int) -> None:
    """Put the bytes the ToRs sent up the EPS and the OCS, and the reconfiguration count, into summary.json."""
    path = out_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary.update({"eps_uplink_bytes": eps_bytes, "ocs_uplink_bytes": ocs_bytes,
                    "ocs_byte_share": ocs_bytes / (eps_bytes + ocs_bytes) if eps_bytes + ocs_bytes else 0.0,
                    "reconfigurations": reconfigurations})
    path.write_text(json.dumps(summary, indent=2))


def summarize(out_dir: Path, jobs_total: int, status: str, started_at: float | None = None) -> dict:
    """summary.json from jobs.csv and flows.csv: makespan, JCT percentiles, cross-rack shuffle bytes."""
    jobs = pd.read_csv(out_dir / "jobs.csv")
    flows = pd.read_csv(out_dir / "flows.csv")
    jct = jobs["jct_s"].to_numpy(dtype=float)

    def pct(q: float) -> float | None:
        return float(np.percentile(jct, q)) if len(jct) else None

    cross = flows[flows["src_rack"] != flows["dst_rack"]] if len(flows) else flows
    recurring = jobs["recurring"].astype(str) == "True"

    def median_of(kind: pd.Series) -> float | None:
        return float(jobs.loc[kind, "jct_s"].median()) if kind.any() else None

    summary = {
        "status": status,
        "jobs_total": jobs_total,
        "jobs_done": int(len(jobs)),
        "makespan_s": float(jobs["finish_s"].max()) if len(jobs) else None,
        "jct_mean_s": float(jct.mean()) if len(jct) else None,
        "jct_median_s": pct(50), "jct_p5_s": pct(5), "jct_p25_s": pct(25), "jct_p75_s": pct(75),
        "jct_p90_s": pct(90), "jct_p95_s": pct(95),
        "jct_median_recurring_s": median_of(recurring), "jct_median_adhoc_s": median_of(~recurring),
        "shuffle_bytes_moved": int(flows.loc[flows["kind"] == "shuffle", "bytes"].sum()) if len(flows) else 0,
        "cross_rack_bytes": int(cross["bytes"].sum()) if len(cross) else 0,
    }
    actions = out_dir / "preemptions.csv"
    if actions.exists():
        taken = pd.read_csv(actions)["action"].value_counts()
        summary.update({"preemptions": int(taken.get("suspend", 0) + taken.get("kill", 0)),
                        "suspensions": int(taken.get("suspend", 0)), "kills": int(taken.get("kill", 0)),
                        "share_changes": int(taken.get("share", 0))})
    summary.update(_dependency_and_deadline_totals(jobs, summary["makespan_s"]))
    allocation = out_dir / "allocation.csv"
    if allocation.exists():
        summary["cores_allocated_mean"] = _time_weighted_mean(pd.read_csv(allocation), "cores_allocated")
    if started_at is not None:
        summary["started_at_unix"] = started_at
    (out_dir / "summary.json").write_text(json.dumps(
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in summary.items()}, indent=2))
    return summary


def _dependency_and_deadline_totals(jobs: pd.DataFrame, makespan_s: float | None) -> dict:
    """Disorders, mean job waiting time, and the jobs that met their deadlines (DSP's throughput: per minute
    of the run)."""
    totals: dict = {"disorders": int(jobs["disorders"].sum()) if len(jobs) else 0,
                    "job_wait_mean_s": float(jobs["wait_s"].mean()) if len(jobs) else None}
    dated = jobs[jobs["deadline_s"].notna()] if len(jobs) else jobs
    if len(dated):
        met = int((dated["met_deadline"].astype(str) == "True").sum())
        totals.update({"deadlines_met": met, "deadline_jobs": int(len(dated)),
                       "deadline_throughput_per_min": met / (makespan_s / 60) if makespan_s else None})
    return totals


def _time_weighted_mean(timeline: pd.DataFrame, column: str) -> float | None:
    """A step function's mean over its rows' span: each value holds until the next row."""
    if len(timeline) < 2:
        return None
    times = timeline["time_s"].to_numpy(dtype=float)
    values = timeline[column].to_numpy(dtype=float)[:-1]
    span = times[-1] - times[0]
    return float((values * np.diff(times)).sum() / span) if span > 0 else None
