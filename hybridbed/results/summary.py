"""summary.json: a run's makespan, JCT percentiles, bytes by path and the counts of what its policy did,
computed from the CSVs the run wrote (so it can be computed again from a crashed run's files)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridbed.results.load import read_table

# the columns of flows.csv the totals read (a paper-scale run's flows.csv has millions of rows: read whole, it took
# gigabytes), the names among them read as categories. The summary's are there as the scheduler process writes
# flows.csv; the totals' (a superset) once each flow's OCS bytes are in.
FLOW_TOTAL_COLUMNS = ("job_id", "kind", "src_rack", "dst_rack", "bytes", "ocs_bytes")
FLOW_SUMMARY_COLUMNS = ("kind", "src_rack", "dst_rack", "bytes")
FLOW_CATEGORIES = {"job_id": "category", "kind": "category"}
# plan.csv's columns where the planned policies (Corral, JobPacker) give when each planned job's stages run; the
# other planning policies' plans have other columns and no such times (DAGPS: each job's planned length alone;
# DSP: its unit periods)
PLAN_STAGE_COLUMNS = ("job_id", "predicted_arrival_s", "map_start_s", "map_end_s", "reduce_end_s")


def read_flows(out_dir: Path, columns: Sequence[str] = FLOW_TOTAL_COLUMNS) -> pd.DataFrame:
    """The columns of the run's flows.csv that the summary and the totals read (a run that has each flow's OCS
    bytes reads it once for both)."""
    return read_table(out_dir / "flows.csv", columns, FLOW_CATEGORIES)


def update_summary(out_dir: Path, fields: dict[str, Any]) -> dict:
    """Add `fields` to the run's summary.json (which must exist); returns the whole summary."""
    path = out_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary.update(fields)
    path.write_text(json.dumps(summary, indent=2))
    return summary


def add_uplink_totals(out_dir: Path, eps_bytes: int, ocs_bytes: int, reconfigurations: int) -> None:
    """Put the bytes the ToRs sent up the EPS and the OCS, and the reconfiguration count, into summary.json."""
    update_summary(
        out_dir,
        {
            "eps_uplink_bytes": eps_bytes,
            "ocs_uplink_bytes": ocs_bytes,
            "all_traffic_ocs_share": ocs_bytes / (eps_bytes + ocs_bytes) if eps_bytes + ocs_bytes else 0.0,
            "reconfigurations": reconfigurations,
        },
    )


def mark_status(out_dir: Path, status: str) -> None:
    """Set summary.json's status, when a run's end is known only to its owner (a user's interrupt: the results
    so far stay, marked as such)."""
    if (out_dir / "summary.json").exists():
        update_summary(out_dir, {"status": status})


def add_flow_totals(out_dir: Path, elephant_bytes: float, flows: pd.DataFrame | None = None) -> dict:
    """Put what the JobPacker paper separates into summary.json, from flows.csv with each flow's OCS bytes:
    - `shuffle_ocs_share`: cross-rack shuffle bytes that rode a circuit / all cross-rack shuffle bytes (None
      when no shuffle crossed racks);
    - `cross_rack_shuffle_bytes`, `intra_rack_shuffle_bytes`, and `cross_rack_input_bytes` (map input read
      from another rack, reported apart from the shuffle);
    - `elephant_aggregates`: (job, source rack, destination rack) shuffle aggregates of at least
      `elephant_bytes` (the scenario's threshold at the run's scale), the traffic the paper steers to circuits.
    `flows`: flows.csv as `read_flows` has it, if read already. Returns what it added."""
    flows = read_flows(out_dir) if flows is None else flows
    shuffle = flows[flows["kind"] == "shuffle"]
    cross = shuffle[shuffle["src_rack"] != shuffle["dst_rack"]]
    inputs = flows[(flows["kind"] == "input") & (flows["src_rack"] != flows["dst_rack"])]
    cross_bytes = int(cross["bytes"].sum())
    aggregates = cross.groupby(["job_id", "src_rack", "dst_rack"], observed=True)["bytes"].sum()
    totals = {
        "shuffle_ocs_share": float(cross["ocs_bytes"].sum()) / cross_bytes if cross_bytes else None,
        "cross_rack_shuffle_bytes": cross_bytes,
        "intra_rack_shuffle_bytes": int(shuffle["bytes"].sum()) - cross_bytes,
        "cross_rack_input_bytes": int(inputs["bytes"].sum()),
        "elephant_aggregates": int((aggregates >= elephant_bytes).sum()),
    }
    update_summary(out_dir, totals)
    return totals


def summarize(
    out_dir: Path, jobs_total: int, status: str, started_at: float | None = None, flows: pd.DataFrame | None = None
) -> dict:
    """summary.json from jobs.csv, flows.csv and tasks.csv: makespan, JCT percentiles, cross-rack shuffle bytes,
    tasks run again. `flows`: flows.csv as `read_flows` has it, if read already."""
    jobs = pd.read_csv(out_dir / "jobs.csv")
    flows = read_flows(out_dir, FLOW_SUMMARY_COLUMNS) if flows is None else flows
    jct = jobs["jct_s"].to_numpy(dtype=float)

    def pct(q: float) -> float | None:
        return float(np.percentile(jct, q)) if len(jct) else None

    cross = flows[flows["src_rack"] != flows["dst_rack"]] if len(flows) else flows
    recurring = jobs["recurring"].astype(str) == "True"

    def median_of(kind: pd.Series) -> float | None:
        return float(jobs.loc[kind, "jct_s"].median()) if kind.any() else None

    summary: dict[str, Any] = {
        "status": status,
        "jobs_total": jobs_total,
        "jobs_done": int(len(jobs)),
        "makespan_s": float(jobs["finish_s"].max()) if len(jobs) else None,
        "jct_mean_s": float(jct.mean()) if len(jct) else None,
        "jct_median_s": pct(50),
        "jct_p5_s": pct(5),
        "jct_p25_s": pct(25),
        "jct_p75_s": pct(75),
        "jct_p90_s": pct(90),
        "jct_p95_s": pct(95),
        "jct_median_recurring_s": median_of(recurring),
        "jct_median_adhoc_s": median_of(~recurring),
        "shuffle_bytes_moved": int(flows.loc[flows["kind"] == "shuffle", "bytes"].sum()) if len(flows) else 0,
        "cross_rack_bytes": int(cross["bytes"].sum()) if len(cross) else 0,
    }
    tasks = out_dir / "tasks.csv"
    if tasks.exists():  # a task that finished on a later attempt was run again: its host lost, or it was killed
        attempts = pd.read_csv(tasks, usecols=["task_id", "attempt"])
        summary["tasks_retried"] = int(attempts.loc[attempts["attempt"] > 0, "task_id"].nunique())
    actions = out_dir / "preemptions.csv"
    if actions.exists():
        taken = pd.read_csv(actions)["action"].value_counts()
        summary.update(
            {
                "preemptions": int(taken.get("suspend", 0) + taken.get("kill", 0)),
                "suspensions": int(taken.get("suspend", 0)),
                "kills": int(taken.get("kill", 0)),
                "share_changes": int(taken.get("share", 0)),
            }
        )
    summary.update(_dependency_and_deadline_totals(jobs, summary["makespan_s"]))
    summary.update(_plan_totals(out_dir, jobs))
    allocation = out_dir / "allocation.csv"
    if allocation.exists():
        summary["cores_allocated_mean"] = _time_weighted_mean(pd.read_csv(allocation), "cores_allocated")
    if started_at is not None:
        summary["started_at_unix"] = started_at
    (out_dir / "summary.json").write_text(
        json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in summary.items()}, indent=2)
    )
    return summary


def _dependency_and_deadline_totals(jobs: pd.DataFrame, makespan_s: float | None) -> dict:
    """Disorders, mean job waiting time, and the jobs that met their deadlines (DSP's throughput: per minute
    of the run)."""
    totals: dict = {
        "disorders": int(jobs["disorders"].sum()) if len(jobs) else 0,
        "job_wait_mean_s": float(jobs["wait_s"].mean()) if len(jobs) else None,
    }
    dated = jobs[jobs["deadline_s"].notna()] if len(jobs) else jobs
    if len(dated):
        met = int((dated["met_deadline"].astype(str) == "True").sum())
        totals.update(
            {
                "deadlines_met": met,
                "deadline_jobs": int(len(dated)),
                "deadline_throughput_per_min": met / (makespan_s / 60) if makespan_s else None,
            }
        )
    return totals


def _plan_totals(out_dir: Path, jobs: pd.DataFrame) -> dict:
    """What the policy's offline plan predicted for the planned jobs that finished, to read beside what they
    did: the planned makespan, median JCT (its end in the plan less the arrival it was planned for: the
    predicted one, off the real one where the scenario puts arrival errors) and mean wait for a first
    container. A planner that queues jobs behind others already does so in its plan; a run that loses to its
    plan loses at run time. Nothing for a run whose policy made no such plan."""
    path = out_dir / "plan.csv"
    if not path.exists() or not len(jobs):
        return {}
    plan = pd.read_csv(path)
    if not set(PLAN_STAGE_COLUMNS) <= set(plan.columns):
        return {}
    planned = plan[plan["job_id"].isin(jobs["job_id"])]
    if not len(planned):
        return {}
    end = planned[["map_end_s", "reduce_end_s"]].max(axis=1)  # a map-only job has no reduce end
    return {
        "plan_makespan_s": float(end.max()),
        "plan_jct_median_s": float((end - planned["predicted_arrival_s"]).median()),
        "plan_wait_mean_s": float((planned["map_start_s"] - planned["predicted_arrival_s"]).mean()),
    }


def _time_weighted_mean(timeline: pd.DataFrame, column: str) -> float | None:
    """A step function's mean over its rows' span: each value holds until the next row."""
    if len(timeline) < 2:
        return None
    times = timeline["time_s"].to_numpy(dtype=float)
    values = timeline[column].to_numpy(dtype=float)[:-1]
    span = times[-1] - times[0]
    return float((values * np.diff(times)).sum() / span) if span > 0 else None
