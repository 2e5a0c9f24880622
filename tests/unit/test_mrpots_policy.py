"""MR-POTS on a cluster and its baselines: how each shares a host, whom it starts, and a small MR-POTS
scenario in the simulator."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from hybridbed.experiments.simulated import run_simulation
from hybridbed.policies.mrpots import DrfqPolicy, FifoLmPolicy, MrPotsPolicy, rate_shares
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.model import JobSpec, Resources, build_job
from tests.small_scenarios import small_mrpots

HOST = Resources(4, 16000, disk_read_mbps=16, disk_write_mbps=16, net_in_mbps=10, net_out_mbps=10)
CPU_HEAVY = Resources(3, 1000, disk_write_mbps=4)  # dominant: cores (3/4)
DISK_HEAVY = Resources(1, 1000, disk_read_mbps=16, disk_write_mbps=8)  # dominant: disk reads (16/16)


def job(job_id: str, demand: Resources, maps: int = 4, arrival: float = 0.0):
    return build_job(JobSpec(job_id, arrival, maps * 1000, 0, 100, maps, 0, 4.0, 0.0, map_demand=demand), demand)


def one_host(policy) -> tuple[SchedulerCore, HostState]:
    host = HostState("h", 0, 8, HOST)
    core = SchedulerCore(policy, ClusterState(1, {"h": host}, 1.0), random.Random(1), replicas=1)
    return core, host


def test_mrpots_runs_one_task_per_dominant_resource_on_a_host_at_mua_fractions():
    core, host = one_host(MrPotsPolicy())
    core.submit(job("cpu", CPU_HEAVY), 0.0)
    core.submit(job("disk", DISK_HEAVY), 0.0)
    core.act(0.0)
    started = core.schedule(0.0)
    assert sorted(launch.task.job_id for launch in started) == ["cpu", "disk"]  # not 4 + 1 tasks by cores
    # cores: 3/4 k1 + 1/4 k2 <= 1; disk writes 1/4 k1 + 1/2 k2 <= 1; reads k2 <= 1: both fit whole
    assert all(launch.task.allocation == launch.task.demand for launch in started)
    core.act(1.0)
    assert core.schedule(1.0) == []  # both groups busy: the pool serves each group serially


def test_mua_scales_tasks_down_where_their_demands_together_exceed_the_host():
    policy = MrPotsPolicy()
    heavier = Resources(3, 1000, disk_read_mbps=8)  # cores 3/4 and half the disk reads
    fractions = policy.fractions([job("a", heavier).maps[0], job("b", DISK_HEAVY).maps[0]], HostState("h", 0, 8, HOST))
    uses = [rate_shares(heavier, HOST), rate_shares(DISK_HEAVY, HOST)]
    reads = sum(f * u[1] for f, u in zip(fractions, uses))
    cores = sum(f * u[0] for f, u in zip(fractions, uses))
    assert reads == pytest.approx(1.0) and cores <= 1.0 + 1e-9  # the contended disk is used in full
    assert min(fractions) < 1.0


def test_drfq_equalises_dominant_shares_until_a_rate_runs_out():
    policy = DrfqPolicy()
    tasks = [job("a", DISK_HEAVY).maps[0], job("b", DISK_HEAVY).maps[0], job("c", Resources(1, 1000)).maps[0]]
    fractions = policy.fractions(tasks, HostState("h", 0, 8, HOST))
    # two tasks each wanting the whole disk: half each; the third (a quarter of the cores) gets all it asks
    assert fractions == pytest.approx([0.5, 0.5, 1.0])


def test_fifo_lm_serves_one_job_at_a_time_and_one_task_per_host():
    core, host = one_host(FifoLmPolicy())
    core.submit(job("first", CPU_HEAVY), 0.0)
    core.submit(job("second", DISK_HEAVY, arrival=1.0), 1.0)
    core.act(1.0)
    (launch,) = core.schedule(1.0)
    assert launch.task.job_id == "first"
    core.act(2.0)
    assert core.schedule(2.0) == []


def disk_task_then_cpu_task() -> tuple[SchedulerCore, HostState]:
    """MR-POTS on one host: a disk-heavy task running alone, and at 1 s a job whose task needs 3 cores and
    half the disk reads."""
    core, host = one_host(MrPotsPolicy())
    core.submit(job("disk", DISK_HEAVY, maps=1), 0.0)
    core.act(0.0)
    core.schedule(0.0)
    core.submit(job("cpu", Resources(3, 1000, disk_read_mbps=8), maps=1), 1.0)
    return core, host


def test_a_task_arriving_beside_another_shrinks_it_first_and_starts_at_its_fraction():
    """The running task's share shrinks in the round's shares, before the new one starts (so it fits)."""
    core, host = disk_task_then_cpu_task()
    actions = core.act(1.0)
    # MUA: reads 1/2 k_cpu + k_disk <= 1, cores 3/4 k_cpu + 1/4 k_disk <= 1; best k_cpu = 1, k_disk = 1/2
    assert [(a.task.job_id, a.action) for a in actions] == [("disk", "share")]
    assert actions[0].allocation.disk_read_mbps == pytest.approx(8.0)
    (launch,) = core.schedule(1.0)
    assert launch.task.allocation == launch.task.demand and host.free.disk_read_mbps == pytest.approx(0.0)


def test_a_task_ending_gives_its_share_back_at_the_next_round_and_an_unchanged_host_keeps_its_shares():
    core, _ = disk_task_then_cpu_task()
    core.act(1.0)
    (launch,) = core.schedule(1.0)
    assert core.act(1.5) == []  # the same two tasks: nothing to change
    core.task_finished(launch.task.task_id, launch.task.attempt, 2.0)
    actions = core.act(2.0)
    assert [(a.task.job_id, a.action) for a in actions] == [("disk", "share")]
    assert actions[0].allocation.disk_read_mbps == pytest.approx(16.0)


@pytest.fixture(scope="module")
def mrpots_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("mrpots")
    runs = {}
    for policy in ("mrpots", "fifo-lm", "drfq", "cpm"):
        runs[policy] = run_simulation(small_mrpots(policy), out / policy)
        runs[policy]["dir"] = out / policy
    return runs


def test_mrpots_shares_hosts_live_and_beats_task_serialisation(mrpots_runs):
    assert all(run["status"] == "done" for run in mrpots_runs.values())
    assert mrpots_runs["mrpots"]["share_changes"] > 0
    actions = pd.read_csv(mrpots_runs["mrpots"]["dir"] / "preemptions.csv")
    assert set(actions["action"]) == {"share"}
    assert mrpots_runs["mrpots"]["makespan_s"] < 0.85 * mrpots_runs["fifo-lm"]["makespan_s"]
    assert mrpots_runs["fifo-lm"].get("share_changes", 0) == 0  # full demands, never changed


def test_tasks_csv_keeps_the_cores_each_attempt_started_with(mrpots_runs):
    """FIFO-LM starts every task at its full demand, MR-POTS some at MUA's fraction of it; together with the
    share changes in preemptions.csv that is each task's whole share timeline."""
    started = {
        policy: pd.read_csv(mrpots_runs[policy]["dir"] / "tasks.csv").set_index("task_id")["launch_cores"]
        for policy in ("mrpots", "fifo-lm")
    }
    full, shared = started["fifo-lm"], started["mrpots"].reindex(started["fifo-lm"].index)
    assert (shared > 0).all() and (shared <= full + 1e-4).all()
    assert (shared < full - 1e-4).any()
