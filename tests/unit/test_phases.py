"""Where a run's time went (results/phases.py), from hand-made result tables whose phases are known."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

from hybridbed.results.load import RunResults
from hybridbed.results.phases import job_phases, jobs_apart, last_job_phases, phase_measures


def task(task_id, job, kind, start, finish, attempt=0):
    return {"task_id": task_id, "job_id": job, "kind": kind, "attempt": attempt, "start_s": start, "finish_s": finish}


def fetch(task_id, job, start, end, nbytes, path, attempt=0, ocs_bytes=0):
    return {
        "src_rack": 0,
        "dst_rack": 0 if path == "rack" else 1,
        "job_id": job,
        "task_id": task_id,
        "attempt": attempt,
        "kind": "shuffle",
        "bytes": nbytes,
        "start_s": start,
        "end_s": end,
        "path": path,
        "ocs_bytes": ocs_bytes,
    }


TCP = {
    "segments_sent": 1000,
    "retransmitted": 20,
    "timeouts": 4,
    "spurious_timeouts": 1,
    "fast_retransmits": 9,
    "reorderings": 3,
    "dsacks_received": 2,
    "retransmitted_share": 0.02,
}


def two_job_run() -> RunResults:
    """j0 arrives at 0: maps 1-5 and 2-6 (the second ran again after a first attempt that ended at 4), a
    reducer from 5 fetching until 8 and computing until 11. j1 arrives at 3: one map 4-9, no reducer."""
    jobs = pd.DataFrame(
        {"job_id": ["j0", "j1"], "arrival_s": [0.0, 3.0], "finish_s": [11.0, 9.0], "jct_s": [11.0, 6.0]}
    )
    tasks = pd.DataFrame(
        [
            task("j0-m0", "j0", "map", 1.0, 5.0),
            task("j0-m1", "j0", "map", 0.5, 4.0),
            task("j0-m1", "j0", "map", 2.0, 6.0, attempt=1),
            task("j0-r0", "j0", "reduce", 5.0, 11.0),
            task("j1-m0", "j1", "map", 4.0, 9.0),
        ]
    )
    flows = pd.DataFrame(
        [
            fetch("j0-r0", "j0", 5.0, 7.0, 250_000, "eps"),  # 1 Mb/s
            fetch("j0-r0", "j0", 6.0, 8.0, 2_500_000, "ocs", ocs_bytes=2_500_000),  # 10 Mb/s
        ]
    )
    allocation = pd.DataFrame(
        {"time_s": [0.0, 2.0, 6.0, 11.0], "running_tasks": [1, 2, 1, 0], "pending_tasks": [1, 1, 0, 0]}
    )
    summary = {"makespan_s": 11.0, "reconfigurations": 3, "fidelity": {"tcp": TCP}}
    return RunResults(
        Path("."),
        summary,
        {
            "jobs": jobs,
            "tasks": tasks,
            "flows": flows,
            "allocation": allocation,
            "ocs_events": pd.DataFrame(),
            "ocs_demand": pd.DataFrame(),
            "links": pd.DataFrame(
                {
                    "time_s": [0.0, 0.0, 11.0, 11.0],
                    "link": ["tor0-eps", "tor0-ocs0", "tor0-eps", "tor0-ocs0"],
                    "tx_bytes": [0, 0, 300_000, 2_700_000],
                }
            ),
        },
    )


def test_a_jobs_phases_run_from_arrival_to_first_start_to_last_map_to_last_fetch_to_finish():
    phases = job_phases(two_job_run())
    j0, j1 = phases.loc["j0"], phases.loc["j1"]
    # the rerun map's first start (0.5) does not count: the job's first start is 1.0
    assert (j0.wait_s, j0.map_s, j0.shuffle_tail_s, j0.reduce_s) == (1.0, 5.0, 2.0, 3.0)
    # no reducer: no shuffle tail, nothing after the maps
    assert (j1.wait_s, j1.map_s, j1.shuffle_tail_s, j1.reduce_s) == (1.0, 5.0, 0.0, 0.0)
    assert last_job_phases(two_job_run())["job"] == "j0"


def test_the_jobs_apart_come_largest_jct_difference_first_with_each_runs_rank():
    first, second = two_job_run(), two_job_run()
    jobs = second.jobs.copy()
    jobs.loc[jobs.job_id == "j1", ["finish_s", "jct_s"]] = [16.0, 13.0]  # 7 s later: now the slower job
    jobs.loc[jobs.job_id == "j0", ["finish_s", "jct_s"]] = [12.0, 12.0]  # 1 s later
    second.tables["jobs"] = jobs
    apart = jobs_apart(first, second, 2, ("a", "b"))
    assert list(apart.index) == ["j1", "j0"]
    assert list(apart.jct_difference_s) == [7.0, 1.0]
    assert (apart.loc["j1", "jct_rank a"], apart.loc["j1", "jct_rank b"]) == (1, 2)
    assert apart.loc["j1", "reduce_s b"] == 7.0  # no reducer: all of the 7 s after its map
    assert list(jobs_apart(first, second, 1, ("a", "b")).index) == ["j1"]


def test_measures_split_a_reducer_into_shuffle_and_compute_and_rate_fetches_by_path():
    measures = phase_measures(two_job_run())
    assert measures["makespan s"] == 11.0
    assert measures["reducer shuffle s (mean)"] == 3.0  # 5 -> 8
    assert measures["reducer compute s (mean)"] == 3.0  # 8 -> 11
    assert measures["map task s (mean)"] == pytest.approx((4 + 3.5 + 4 + 5) / 4)  # every finished attempt
    assert measures["eps fetch Mb/s"] == pytest.approx(1.0)
    assert measures["ocs fetch Mb/s"] == pytest.approx(10.0)
    assert measures["job shuffle tail s (mean)"] == 1.0
    # 1 task for 2 s, then 2 tasks for 4 s while some were pending; after 6 s nothing pending
    assert measures["tasks running while some pending (mean)"] == pytest.approx((1 * 2 + 2 * 4) / 6)
    assert measures["reconfigurations"] == 3
    # 3 MB went up the uplinks for 2.75 MB moved between racks; the hosts retransmitted 2 % of their segments
    assert measures["uplink bytes per byte between racks"] == pytest.approx(3.0 / 2.75)
    assert measures["OCS uplink bytes per byte on circuits"] == pytest.approx(2.7 / 2.5)  # the OCS uplink's
    assert measures["TCP segments retransmitted (share)"] == 0.02
    assert (measures["TCP timeouts"], measures["TCP reorderings"]) == (4, 3)


def test_a_run_with_nothing_between_racks_has_no_uplink_overhead_rather_than_a_division_by_zero():
    run = two_job_run()
    run.tables["flows"] = run.flows.assign(dst_rack=run.flows.src_rack, path="rack", ocs_bytes=0)  # all in one rack
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's warning of 0 / 0
        measures = phase_measures(run)
    assert "uplink bytes per byte between racks" not in measures
    assert "OCS uplink bytes per byte on circuits" not in measures


def test_measures_sum_the_time_cpu_quotas_held_tasks_back_where_it_was_counted():
    run = two_job_run()
    assert "task s held back by CPU quotas (all)" not in phase_measures(run)  # no column: as before it was kept
    tasks = run.tasks
    run.tables["tasks"] = tasks.assign(throttled_s=float("nan"))  # the simulator leaves the column empty
    assert "task s held back by CPU quotas (all)" not in phase_measures(run)
    run.tables["tasks"] = tasks.assign(throttled_s=[0.0, 0.25, 0.0, 1.5, float("nan")])
    assert phase_measures(run)["task s held back by CPU quotas (all)"] == 1.75
    assert "task processes' CPU s (all)" not in phase_measures(run)
    run.tables["tasks"] = tasks.assign(cpu_s=[0.5, 0.25, 0.0, 1.5, float("nan")])
    assert phase_measures(run)["task processes' CPU s (all)"] == 2.25


def test_an_elephant_aggregate_sends_from_its_first_connections_start_to_its_last_ones_end():
    run = two_job_run()
    assert not any("aggregate" in name for name in phase_measures(run).index)  # no marked connections counted
    elephants = [
        fetch("j0-r0", "j0", 5.0, 8.0, 500_000, "eps"),
        fetch("j0-r1", "j0", 5.5, 9.5, 500_000, "ocs"),  # the same job and rack pair: ends 1.5 s apart
        fetch("j1-r0", "j1", 2.0, 4.0, 500_000, "eps"),  # an aggregate of one connection
        fetch("j1-r1", "j1", 2.0, 3.0, 500_000, "rack"),  # inside a rack: no circuit to ask for
    ]
    run.tables["flows"] = pd.DataFrame(elephants).assign(elephant=1)
    measures = phase_measures(run)
    assert measures["elephant aggregate s sending (mean)"] == (4.5 + 2.0) / 2
    assert measures["elephant aggregate connections' ends apart s (median)"] == 1.5
