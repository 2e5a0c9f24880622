"""Run results written as the run goes: one CSV row per finished job, task and transfer, flushed at once,
so a crash leaves everything up to that moment readable; the summary is computed from the CSVs."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

JOB_FIELDS = ["job_id", "arrival_s", "start_s", "finish_s", "jct_s", "recurring", "n_maps", "n_reduces",
              "input_bytes", "shuffle_bytes", "output_bytes"]
TASK_FIELDS = ["task_id", "job_id", "kind", "attempt", "host", "rack", "locality", "start_s", "finish_s",
               "read_local_bytes", "read_remote_bytes", "fetched_bytes", "written_bytes"]
USAGE_FIELDS = ["time_s", "host", "running_tasks", "cpu_percent", "rss_mb"]
PLAN_FIELDS = ["job_id", "map_racks", "map_start_s", "map_end_s", "reduce_racks", "reduce_start_s", "reduce_end_s",
               "uses_ocs"]
FLOW_FIELDS = ["task_id", "attempt", "kind", "src_host", "dst_host", "src_rack", "dst_rack", "bytes", "start_s", "end_s"]


class CsvLog:
    """A CSV file that gets its header once and every row flushed as it is written."""

    def __init__(self, path: Path, fields: list[str]):
        self.path = path
        self.fields = fields
        self._file = path.open("w", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=fields)
        self._writer.writeheader()
        self._file.flush()

    def write(self, row: dict) -> None:
        self._writer.writerow({k: row.get(k, "") for k in self.fields})
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def summarize(out_dir: Path, jobs_total: int, status: str, started_at: float | None = None) -> dict:
    """summary.json from jobs.csv and flows.csv: makespan, JCT percentiles, cross-rack shuffle bytes."""
    jobs = pd.read_csv(out_dir / "jobs.csv")
    flows = pd.read_csv(out_dir / "flows.csv")
    jct = jobs["jct_s"].to_numpy(dtype=float)

    def pct(q: float) -> float | None:
        return float(np.percentile(jct, q)) if len(jct) else None

    cross = flows[flows["src_rack"] != flows["dst_rack"]] if len(flows) else flows
    summary = {
        "status": status,
        "jobs_total": jobs_total,
        "jobs_done": int(len(jobs)),
        "makespan_s": float(jobs["finish_s"].max()) if len(jobs) else None,
        "jct_mean_s": float(jct.mean()) if len(jct) else None,
        "jct_median_s": pct(50), "jct_p5_s": pct(5), "jct_p25_s": pct(25), "jct_p75_s": pct(75),
        "jct_p90_s": pct(90), "jct_p95_s": pct(95),
        "shuffle_bytes_moved": int(flows.loc[flows["kind"] == "shuffle", "bytes"].sum()) if len(flows) else 0,
        "cross_rack_bytes": int(cross["bytes"].sum()) if len(cross) else 0,
    }
    if started_at is not None:
        summary["started_at_unix"] = started_at
    (out_dir / "summary.json").write_text(json.dumps(
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in summary.items()}, indent=2))
    return summary
