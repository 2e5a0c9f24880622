"""Preemption and live CPU shares in the scheduler core: what a suspended, resumed or killed task holds."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from hybridbed.policies.fifo import FifoPolicy
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.core import PolicyError, SchedulerCore, TaskAction
from hybridbed.scheduler.model import Allocation, JobSpec, Resources, TaskState, build_job
from hybridbed.scheduler.policy import Preemption, Share

TASK = Resources(2, 1000)


class Scripted(FifoPolicy):
    """FIFO, plus whatever preemptions and shares a test queues for the next round."""

    name = "scripted"

    def __init__(self) -> None:
        self.preemptions: list[Preemption] = []
        self.changes: list[Share] = []

    def preempt(self, cluster):
        queued, self.preemptions = self.preemptions, []
        return queued

    def shares(self, cluster):
        queued, self.changes = self.changes, []
        return queued


def setup(jobs: int = 2):
    host = HostState("h", 0, 4, Resources(4, 4000))
    state = ClusterState(1, {"h": host}, slowstart=1.0)
    policy = Scripted()
    core = SchedulerCore(policy, state, random.Random(1), replicas=1)
    tasks = []
    for i in range(jobs):
        job = build_job(JobSpec(f"j{i}", float(i), 10, 0, 0, 1, 0, 5.0, 0.0), TASK)
        core.submit(job, 0.0)
        tasks.append(job.maps[0])
    return core, policy, host, tasks


def test_a_suspended_task_keeps_its_container_and_memory_and_gives_up_its_cores():
    core, policy, host, (first, second) = setup()
    core.schedule(0.0)
    assert first.state is TaskState.RUNNING and second.state is TaskState.RUNNING and host.free.cores == 0
    policy.preemptions = [Preemption(first, "suspend")]
    assert core.act(1.0) == [TaskAction(first, 0, "h", "suspend")]
    assert first.state is TaskState.SUSPENDED and host.free == Resources(2, 2000) and host.free_slots == 2
    assert core.cluster.jobs["j0"].allocated == Resources(0, 1000)
    assert core.cluster.allocation() == Allocation(1, 1, 0, 0.5, 0.5)
    third_job = build_job(JobSpec("j2", 2.0, 10, 0, 0, 1, 0, 5.0, 0.0), TASK)
    core.submit(third_job, 1.0)
    assert [launch.task for launch in core.schedule(1.0)] == [third_job.maps[0]]  # on the freed cores
    policy.preemptions = [Preemption(first, "resume")]
    with pytest.raises(PolicyError, match="has not 2 cores free"):
        core.act(2.0)
    core.task_finished(third_job.maps[0].task_id, 0, 3.0)
    policy.preemptions = [Preemption(first, "resume")]
    core.act(3.0)
    assert first.state is TaskState.RUNNING and host.free == Resources(0, 2000)
    assert core.cluster.allocation() == Allocation(2, 0, 0, 1.0, 0.5)
    assert core.task_finished(first.task_id, 0, 9.0) is not None


def test_a_suspended_task_that_finishes_meanwhile_is_done_and_frees_everything():
    core, policy, host, (first, _) = setup()
    core.schedule(0.0)
    policy.preemptions = [Preemption(first, "suspend")]
    core.act(1.0)
    core.task_finished(first.task_id, 0, 1.0)  # it ended before the freeze took hold
    assert first.state is TaskState.DONE and host.free == Resources(2, 3000)  # the other task holds the rest
    assert core.cluster.allocation() == Allocation(1, 0, 0, 0.5, 0.25)


def test_a_killed_task_runs_again_from_scratch_and_its_old_attempt_is_ignored():
    core, policy, host, (first, _) = setup()
    core.schedule(0.0)
    policy.preemptions = [Preemption(first, "kill")]
    assert core.act(1.0) == [TaskAction(first, 0, "h", "kill")]  # the attempt that was killed
    assert first.state is TaskState.PENDING and first.attempt == 1 and host.free == Resources(2, 3000)
    assert core.cluster.allocation() == Allocation(1, 0, 1, 0.5, 0.25)
    assert core.task_finished(first.task_id, 0, 2.0) is None  # the killed attempt's late report
    assert [launch.task for launch in core.schedule(2.0)] == [first]


def test_a_running_task_gets_a_new_share_within_what_its_host_has():
    core, policy, host, (first, second) = setup()
    core.schedule(0.0)
    policy.preemptions = [Preemption(second, "kill")]
    core.act(0.5)
    three = replace(first.allocation, cores=3.0)
    policy.changes = [Share(first, three)]
    assert core.act(1.0) == [TaskAction(first, 0, "h", "share", three)]
    assert first.allocation.cores == 3.0 and host.free.cores == 1.0
    assert core.cluster.jobs["j0"].allocated.cores == 3.0
    policy.changes = [Share(first, replace(three, cores=5.0))]
    with pytest.raises(PolicyError, match="cores 5; 4 are there for it"):
        core.act(2.0)
    policy.changes = [Share(first, replace(three, memory_mb=10.0))]
    with pytest.raises(PolicyError, match="not memory"):
        core.act(2.0)


def test_a_share_of_a_modelled_rate_must_fit_the_host_and_scales_the_demand():
    host = HostState("h", 0, 2, Resources(4, 4000, disk_write_mbps=10))
    core = SchedulerCore(Scripted(), ClusterState(1, {"h": host}, 1.0), random.Random(1))
    job = build_job(JobSpec("j", 0, 10, 0, 0, 1, 0, 1.0, 0.0), Resources(2, 256, disk_write_mbps=8))
    core.submit(job, 0.0)
    (launch,) = core.schedule(0.0)
    half = Share.scaled(launch.task, 0.5)
    assert half.allocation == Resources(1, 256, disk_write_mbps=4)
    core.policy.changes = [half]
    core.act(1.0)
    assert host.free.disk_write_mbps == 6 and host.free.cores == 3
    core.policy.changes = [Share(launch.task, replace(half.allocation, disk_write_mbps=11))]
    with pytest.raises(PolicyError, match="disk_write_mbps 11; 10 are there for it"):
        core.act(2.0)


def test_bad_preemptions_are_refused_by_name():
    core, policy, _, (first, _) = setup()
    with pytest.raises(ValueError, match="unknown preemption 'pause'"):
        Preemption(first, "pause")
    policy.preemptions = [Preemption(first, "resume")]
    with pytest.raises(PolicyError, match="tries to resume j0-m0, which is pending"):
        core.act(0.0)


class OnTheClock(Scripted):
    """FIFO, and at each (time, action, fraction) of a script, that action on the task running then (a share:
    that fraction of its demand)."""

    name = "on-the-clock"

    def __init__(self, script: list[tuple[float, str, float | None]]) -> None:
        super().__init__()
        self.script = list(script)

    def preempt(self, cluster):
        task = next((t for h in cluster.hosts.values() for t in h.running.values()), None)
        if self.script and task is not None and cluster.now >= self.script[0][0] - 1e-9:
            _, action, fraction = self.script.pop(0)
            if action == "share":
                self.changes.append(Share.scaled(task, fraction))
            else:
                self.preemptions.append(Preemption(task, action))
        return super().preempt(cluster)


def simulate_one_task(
    tmp_path,
    script: list[tuple[float, str, float | None]],
    overhead_s: float = 0.0,
    writes: bool = False,
    write_rate_mbps: float = 0.0,
) -> float:
    """One 4-second task alone in a simulated cluster, the policy acting on it as `script` says; returns when
    the task finished. `writes`: it also writes 8 MB to a 1 MB/s disk (8 s, alongside its compute), at
    `write_rate_mbps` if given."""
    from hybridbed.config.scenario import Scenario
    from hybridbed.experiments.simulated import result_logs
    from hybridbed.simulator.engine import Simulation

    scenario = Scenario.model_validate(
        {
            "name": "preempt",
            "backend": "simulation",
            "fabric": {"racks": 2, "hosts_per_rack": 1},
            "workers": {
                "slots_per_host": 2,
                "cores_per_host": 2,
                "resume_overhead_s": overhead_s,
                "heartbeat_s": 0.25,
                "disk_read_mbps_per_host": 8 if writes else 0,
                "disk_write_mbps_per_host": 8 if writes else 0,
            },
            "scheduler": {"policy": "fifo"},
        }
    )
    logs = result_logs(tmp_path)
    simulation = Simulation(scenario, logs)
    simulation.core.policy = OnTheClock(script)
    output = 8_000_000 if writes else 0
    demand = Resources(1, 256, disk_write_mbps=write_rate_mbps)
    simulation.run([JobSpec("j", 0.0, 10, 0, output, 1, 0, 4.0, 0.0, map_demand=demand)])
    logs.close()
    return simulation.core.finished[0].finished_s


def test_the_simulator_pauses_a_suspended_task_and_charges_the_recovery(tmp_path):
    assert simulate_one_task(tmp_path, []) == pytest.approx(4.0)
    assert simulate_one_task(
        tmp_path, [(1.0, "suspend", None), (3.0, "resume", None)], overhead_s=0.5
    ) == pytest.approx(6.5)  # 4 s of compute, 2 s suspended, 0.5 s to recover
    # its disk write (longer than its compute) stops with it and goes on from where it was
    assert simulate_one_task(tmp_path, [], writes=True) == pytest.approx(8.0, rel=0.01)
    assert simulate_one_task(tmp_path, [(1.0, "suspend", None), (3.0, "resume", None)], writes=True) == pytest.approx(
        10.0, rel=0.01
    )


def test_the_simulator_restarts_a_killed_task_from_scratch(tmp_path):
    assert simulate_one_task(tmp_path, [(1.0, "kill", None)]) == pytest.approx(5.0)


def test_the_simulator_computes_at_the_tasks_share_of_its_cores(tmp_path):
    assert simulate_one_task(tmp_path, [(1.0, "share", 0.5)]) == pytest.approx(7.0)  # 3 s left at half pace


def test_the_simulator_holds_a_tasks_flows_to_its_new_share(tmp_path):
    # 8 MB at 1 MB/s; from 1 s at half the rate: 7 MB at 0.5 MB/s ends at 15 s (the compute, at half pace, at 7 s)
    assert simulate_one_task(tmp_path, [(1.0, "share", 0.5)], writes=True, write_rate_mbps=8) == pytest.approx(
        15.0, rel=0.01
    )
