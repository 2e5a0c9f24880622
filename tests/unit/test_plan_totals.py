"""What a planned policy's offline plan predicted, in summary.json beside what the run did."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hybridbed.results.records import JOB_FIELDS
from hybridbed.results.summary import FLOW_SUMMARY_COLUMNS, summarize


def job(job_id: str, arrival_s: float, finish_s: float) -> dict:
    return {
        "job_id": job_id,
        "arrival_s": arrival_s,
        "start_s": arrival_s,
        "finish_s": finish_s,
        "jct_s": finish_s - arrival_s,
        "recurring": True,
        "wait_s": 0.0,
        "disorders": 0,
    }


def summary_of(tmp_path, plan: pd.DataFrame) -> dict:
    jobs = [job("a", 0.0, 25.0), job("b", 5.0, 50.0)]
    pd.DataFrame(jobs, columns=JOB_FIELDS).to_csv(tmp_path / "jobs.csv", index=False)
    plan.to_csv(tmp_path / "plan.csv", index=False)
    summarize(tmp_path, 3, "done", flows=pd.DataFrame(columns=list(FLOW_SUMMARY_COLUMNS)))
    return json.loads((tmp_path / "summary.json").read_text())


def test_the_plan_of_the_finished_planned_jobs_is_summarized_beside_the_run(tmp_path):
    plan = pd.DataFrame(
        [
            {"job_id": "a", "predicted_arrival_s": 0.0, "map_start_s": 0.0, "map_end_s": 10.0, "reduce_end_s": 30.0},
            # a map-only job: its plan ends with its maps, queued behind a's; planned for an arrival at 4 s, a
            # second before the real one (an arrival error): its planned times count from the planned arrival
            {"job_id": "b", "predicted_arrival_s": 4.0, "map_start_s": 30.0, "map_end_s": 40.0, "reduce_end_s": None},
            # planned, not finished: left out
            {"job_id": "c", "predicted_arrival_s": 9.0, "map_start_s": 40.0, "map_end_s": 90.0, "reduce_end_s": 99.0},
        ]
    )
    summary = summary_of(tmp_path, plan)
    assert summary["plan_makespan_s"] == pytest.approx(40.0)
    assert summary["plan_jct_median_s"] == pytest.approx((30.0 + 36.0) / 2)
    assert summary["plan_wait_mean_s"] == pytest.approx((0.0 + 26.0) / 2)
    assert summary["makespan_s"] == pytest.approx(50.0)  # the run's own, apart


def test_a_plan_that_predicts_no_job_ends_adds_nothing(tmp_path):
    dagps_plan = pd.DataFrame([{"job_id": "a", "planned_length_s": 20.0, "lower_bound_s": 12.0}])
    summary = summary_of(tmp_path, dagps_plan)
    assert not [key for key in summary if key.startswith("plan_")]
