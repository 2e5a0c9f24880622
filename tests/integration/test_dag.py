"""DAG jobs on the real testbed: every task of a stage with parents fetches its partition from every
task of its parent stages over TCP, and starts only once they are all done (DAGPS's schedule online)."""

from __future__ import annotations

import pandas as pd

from hybridbed.experiments.emulated import run_scenario
from hybridbed.scheduler.assembly import container
from hybridbed.scheduler.model import build_job
from hybridbed.workloads.build import build_workload
from tests.small_scenarios import small_dag


def test_dag_jobs_fetch_from_every_parent_task_and_respect_precedence(tmp_path):
    scenario = small_dag(
        "emulation",
        {
            "jobs": 3,
            "arrival_window_s": 5,
            "dag": {"benchmark": "tpch", "templates": 2, "fact_tasks": 3, "max_tasks": 3},
            "suite": {"block_mb": 64, "cpu_heavy_s": 1, "io_heavy_s": 0.5},
        },
        max_duration_s=600,
    )
    out = tmp_path / "run"
    summary = run_scenario(scenario, out)
    assert summary["status"] == "done" and summary["jobs_done"] == 3, summary
    tasks = pd.read_csv(out / "tasks.csv").set_index("task_id")
    shuffle = pd.read_csv(out / "flows.csv").query("kind == 'shuffle'")
    depth = 0
    for spec in build_workload(scenario):
        job = build_job(spec, container(scenario))
        depth = max(depth, len({t.stage for t in job.reduces}))
        for task in job.reduces:
            row = tasks.loc[task.task_id]
            sources = job.sources_of(task)
            assert row.fetched_bytes == task.fetch_bytes > 0, task.task_id
            fetched = shuffle[shuffle.task_id == task.task_id]
            # a connection per host a parent task ran on (Hadoop's shuffle), or more where outputs came later
            source_hosts = {tasks.loc[s.task_id].host for s in sources}
            assert set(fetched.src_host) == source_hosts, task.task_id
            assert len(source_hosts) <= len(fetched) <= len(sources), task.task_id
            assert fetched.bytes.sum() == task.fetch_bytes, task.task_id
            assert row.start_s >= max(tasks.loc[s.task_id].finish_s for s in sources)
    assert depth >= 3  # more than MapReduce's two stages
    # DAGPS's schedules are built in the scheduler's plan-solver process and taken while the jobs run
    plan = pd.read_csv(out / "plan.csv")
    assert sorted(plan.job_id) == sorted(s.job_id for s in build_workload(scenario))
    assert (plan.used_from_s >= plan.requested_s).all() and (plan.build_wall_s > 0).all()
    plan = pd.read_csv(out / "plan.csv")
    assert len(plan) == 3 and (plan.planned_s >= plan.new_lb_s - 1e-3).all()
