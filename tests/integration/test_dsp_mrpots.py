"""DSP and MR-POTS on the real testbed: DSP freezes and thaws real tasks (and never breaks a dependency),
MR-POTS re-quotas and re-paces them while they run. How close each run comes to the simulator's is
bench/sim_vs_emu.py's business."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hybridbed.experiments.emulated import run_scenario
from tests.small_scenarios import small_dsp, small_mrpots

ENDED_AS_SUSPENDED_S = 0.5  # a task's end report and a suspension crossing on the control network


def test_dsp_suspends_and_resumes_real_tasks_and_keeps_every_dependency(tmp_path):
    summary = run_scenario(small_dsp("dsp", "emulation"), tmp_path / "emu")
    assert summary["status"] == "done" and summary["jobs_done"] == 8, summary
    actions = pd.read_csv(tmp_path / "emu" / "preemptions.csv")
    suspended = set(actions.query("action == 'suspend'").task_id)
    resumed = set(actions.query("action == 'resume'").task_id)
    assert resumed and resumed <= suspended
    tasks = pd.read_csv(tmp_path / "emu" / "tasks.csv")
    # a task that ended on its host as its suspension was sent is done, not frozen (the agent leaves an ended
    # task alone), so it is never resumed: its end falls right at the suspension
    suspended_at = actions.query("action == 'suspend'").groupby("task_id").time_s.max()
    finished_at = tasks.groupby("task_id").finish_s.max()
    for task_id in suspended - resumed:
        assert abs(finished_at[task_id] - suspended_at[task_id]) < ENDED_AS_SUSPENDED_S, task_id
    assert (tasks[tasks.task_id.isin(suspended)].attempt == 0).all()  # went on where they were, not again
    assert summary["disorders"] == 0
    assert pd.read_csv(tmp_path / "emu" / "allocation.csv")["suspended_tasks"].max() > 0


def test_mrpots_shares_real_hosts_while_tasks_run(tmp_path):
    summary = run_scenario(small_mrpots("mrpots", "emulation"), tmp_path / "emu")
    assert summary["status"] == "done" and summary["jobs_done"] == 8, summary
    shares = pd.read_csv(tmp_path / "emu" / "preemptions.csv").query("action == 'share'")
    assert len(shares) > 0 and (shares.cores > 0).all()
    assert (shares.disk_read_mbps < 16).any()  # disk reads held below a whole disk while another task shared it
    tasks = pd.read_csv(tmp_path / "emu" / "tasks.csv")
    assert set(tasks.task_id) >= set(shares.task_id)  # every task whose share changed finished
    # each task's cgroup said how long its quota held it back, its process what CPU it used, and the run's
    # fidelity sums both up
    assert tasks.throttled_s.notna().all() and (tasks.throttled_s >= 0).all()
    assert (tasks.cpu_s > 0).all() and (tasks.launch_cores > 0).all()
    throttling = json.loads((tmp_path / "emu" / "summary.json").read_text())["fidelity"]["task_throttling"]
    assert throttling["of_tasks"] == len(tasks) and throttling["seconds"] == pytest.approx(tasks.throttled_s.sum())
    assert throttling["cpu_s"] == pytest.approx(tasks.cpu_s.sum(), abs=0.01)
