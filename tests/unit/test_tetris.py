"""Tetris and DRF on the Tetris paper's worked example (§2.1, Fig. 1) and the packing heuristics on hand cases."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from hybridbed.policies.drf import DrfPolicy
from hybridbed.policies.fifo import FifoPolicy
from hybridbed.policies.tetris import TetrisPolicy, alignment, remaining_work
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.model import JobSpec, Resources, build_job
from hybridbed.scheduler.pending import PendingTasks
from hybridbed.scheduler.policy import Policy

T = 1.0  # every task's duration when it gets the resources it asks for
NEGLIGIBLE = dict(cores=0, memory_mb=0)  # "negligible CPU and memory" (§2.1)


def fig1_jobs() -> list[JobSpec]:
    """Jobs A, B, C: maps of <1 core, 2 GB> (A, 18 of them) or <3 cores, 1 GB> (B, C, 6 each); three
    reduces each needing 1 Gb/s of network in, with negligible cores and memory."""
    reduce = Resources(**NEGLIGIBLE, net_in_mbps=1000)
    return [
        JobSpec(
            name, 0.0, maps, maps, 0, maps, 3, T, T, map_demand=Resources(cores, memory_gb * 1000), reduce_demand=reduce
        )
        for name, maps, cores, memory_gb in (("A", 18, 1, 2), ("B", 6, 3, 1), ("C", 6, 3, 1))
    ]


def run_to_completion(policy: Policy, machines: int = 1) -> dict[str, float]:
    """The Fig. 1 cluster (18 cores, 36 GB, 3 Gb/s in all, split over `machines`): tasks take T at the
    rate they ask for; reduces on a machine share its network, so over-allocated ones run slower.
    Returns each job's finish time."""
    capacity = Resources(18 / machines, 36_000 / machines, net_in_mbps=3000 / machines)
    hosts = {f"m{i}": HostState(f"m{i}", 0, 100, capacity) for i in range(machines)}
    cluster = ClusterState(1, hosts, slowstart=1.0)  # a strict barrier between the phases
    core = SchedulerCore(policy, cluster, random.Random(0), replicas=1)
    for spec in fig1_jobs():
        core.submit(build_job(spec, Resources()), 0.0)
    now, left = 0.0, {}  # task -> work left, in units of T at its full rate
    while cluster.jobs:
        for launch in core.schedule(now):
            left[launch.task.task_id] = T
        rates = {}
        for host in hosts.values():
            asked = sum(t.demand.net_in_mbps for t in host.running.values())
            for task in host.running.values():
                rates[task.task_id] = min(1.0, capacity.net_in_mbps / asked) if task.demand.net_in_mbps else 1.0
        step = min(left[t] / rates[t] for t in left)
        now += step
        for task_id in list(left):
            left[task_id] -= rates[task_id] * step
            if left[task_id] <= 1e-9:
                del left[task_id]
                core.task_finished(task_id, core.tasks[task_id].attempt, now)
    return {job.job_id: round(job.finished_s, 6) for job in core.finished}


def test_fig1_packing_finishes_the_jobs_at_2t_3t_4t():
    finish = run_to_completion(TetrisPolicy())
    assert sorted(finish.values()) == [2 * T, 3 * T, 4 * T]


def test_fig1_drf_over_cores_and_memory_finishes_every_job_at_6t():
    # maps in 3t (A runs 6 at a time, B and C 2 each), then all nine reducers at once on 3 Gb/s: 3t more
    assert run_to_completion(DrfPolicy()) == {"A": 6 * T, "B": 6 * T, "C": 6 * T}


# The paper's DRF map schedule on three machines (§2.1, footnote 5): per machine, the jobs of the map tasks it
# runs in each interval of length t (the paper's columns t, 2t, 3t, 4t).
FOOTNOTE_5 = {"m0": ("AABA", "CAAA", "AAB", "C"), "m1": ("BAAA", "BB", "BAA", ""), "m2": ("CAAA", "CC", "CAA", "")}


class FootnoteSchedule(DrfPolicy):
    """The maps where and when footnote 5 puts them; then the reduces, in DRF's order (negligible cores and
    memory: all at once), once every job's maps are done, as the paper's "the reduce phases take an extra
    3t" reads."""

    def __init__(self) -> None:
        super().__init__()
        self.launched: dict[tuple[str, int], int] = {}  # (machine, column) -> maps started there

    def next_task(self, host, cluster):
        column = round(cluster.now / T)
        planned = FOOTNOTE_5[host.name][column] if column < len(FOOTNOTE_5[host.name]) else ""
        started = self.launched.get((host.name, column), 0)
        if started < len(planned):
            self.launched[host.name, column] = started + 1
            return cluster.best_in_stage(cluster.jobs[planned[started]], 0, host)[0]
        if any(p.maps for p in cluster.pending.values()) or any(
            t.kind.value == "map" for h in cluster.hosts.values() for t in h.running.values()
        ):
            return None
        for job in sorted(cluster.launchable.values(), key=lambda j: (self.share(j, cluster), j.job_id)):
            return cluster.best_in_stage(job, 1, host)[0]
        return None


def test_fig1_on_three_machines_the_papers_drf_schedule_ends_at_7t():
    """Footnote 5's maps end at 4t; the nine reduces then share the three machines' 3 Gb/s, three to a
    machine: 3t more, 7t (§2.1). (The model's own DRF, whose reduces start when their job's maps are done,
    ends the jobs at 5.5t, 5.5t and 6t: the paper's 7t holds its reduces back until every job's maps are.)"""
    assert run_to_completion(FootnoteSchedule(), machines=3) == {"A": 7 * T, "B": 7 * T, "C": 7 * T}


def test_fig1_on_three_machines_packing_still_beats_drf():
    tetris, drf = run_to_completion(TetrisPolicy(), machines=3), run_to_completion(DrfPolicy(), machines=3)
    assert sorted(tetris.values()) == [2 * T, 3 * T, 4 * T]
    assert max(tetris.values()) < max(drf.values())
    assert sum(tetris.values()) < sum(drf.values())


def test_tetris_never_over_allocates_the_network():
    policy = TetrisPolicy()
    capacity = Resources(18, 36_000, net_in_mbps=3000)
    host = HostState("m", 0, 100, capacity)
    cluster = ClusterState(1, {"m": host}, slowstart=0.0)
    core = SchedulerCore(policy, cluster, random.Random(0), replicas=1)
    for spec in fig1_jobs():
        core.submit(build_job(spec, Resources()), 0.0)
    core.schedule(0.0)
    assert sum(t.demand.net_in_mbps for t in host.running.values()) <= 3000
    assert host.used.cores <= 18 and host.used.memory_mb <= 36_000


def test_alignment_prefers_the_task_that_fills_what_is_free():
    capacity = Resources(10, 10_000, net_in_mbps=1000)
    free = Resources(8, 2000, net_in_mbps=1000)  # plenty of cores, little memory
    cpu_heavy, memory_heavy = Resources(4, 500), Resources(1, 2000)
    assert alignment(free, cpu_heavy, capacity) == pytest.approx(0.8 * 0.4 + 0.2 * 0.05)
    assert alignment(free, cpu_heavy, capacity) > alignment(free, memory_heavy, capacity)
    # a dimension the capacity does not model does not count
    assert alignment(free, Resources(4, 500, disk_read_mbps=100), capacity) == alignment(free, cpu_heavy, capacity)


def test_remaining_work_counts_tasks_still_to_schedule():
    capacity = Resources(10, 10_000)
    job = build_job(
        JobSpec("j", 0, 4, 4, 0, 4, 2, 2.0, 3.0, map_demand=Resources(1, 1000), reduce_demand=Resources(2, 0)),
        Resources(),
    )
    pending = PendingTasks()
    for task in job.tasks:
        pending.add(task, {}, set())
    full = 4 * (0.1 + 0.1) * 2.0 + 2 * 0.2 * 3.0
    assert remaining_work(pending, capacity) == pytest.approx(full)
    pending.remove(job.maps[0])
    assert remaining_work(pending, capacity) == pytest.approx(full - 0.2 * 2.0)


def test_fairness_knob_limits_the_choice_to_the_jobs_furthest_below_their_share():
    capacity = Resources(4, 4000)
    hosts = {"m": HostState("m", 0, 4, capacity)}
    cluster = ClusterState(1, hosts, slowstart=1.0)
    policy = TetrisPolicy(fairness=0.5)
    core = SchedulerCore(policy, cluster, random.Random(0), replicas=1)
    for i in range(4):
        core.submit(build_job(JobSpec(f"j{i}", float(i), 1, 0, 0, 2, 0, 1, 1), Resources(1, 100)), 0.0)
    core._start(cluster.pending["j0"].any_map(), hosts["m"], 0.0)
    core._start(cluster.pending["j1"].any_map(), hosts["m"], 0.0)
    eligible = [j.job_id for j in policy.eligible_jobs(cluster)]
    assert eligible == ["j2", "j3"]  # ⌈(1 − 0.5)·4⌉ = 2 jobs, those holding nothing


def test_barrier_knob_promotes_the_last_tasks_of_a_stage():
    capacity = Resources(4, 4000)
    hosts = {"m": HostState("m", 0, 4, capacity)}
    cluster = ClusterState(1, hosts, slowstart=1.0)
    policy = TetrisPolicy(fairness=0.0, barrier=0.5, srtf_weight=0.0)
    core = SchedulerCore(policy, cluster, random.Random(0), replicas=1)
    # "big" aligns better (more cores), "nearly" has half its maps done: past the barrier, it goes first
    core.submit(build_job(JobSpec("big", 0, 1, 0, 0, 4, 0, 1, 1), Resources(2, 100)), 0.0)
    core.submit(build_job(JobSpec("nearly", 1, 1, 0, 0, 2, 0, 1, 1), Resources(1, 100)), 0.0)
    first = cluster.pending["nearly"].any_map()
    core._start(first, hosts["m"], 0.0)
    core.task_finished(first.task_id, first.attempt, 1.0)
    assert policy.next_task(hosts["m"], cluster).job_id == "nearly"
    assert TetrisPolicy(fairness=0.0, barrier=1.0, srtf_weight=0.0).next_task(hosts["m"], cluster).job_id == "big"


@pytest.mark.parametrize(
    "params, field",
    [
        ({"fairness": 1.0}, "fairness"),
        ({"barrier": 1.5}, "barrier"),
        ({"srtf_weight": -1}, "srtf_weight"),
        ({"remote_penalty": 1}, "remote_penalty"),
        ({"fair_share": "lottery"}, "fair_share"),
    ],
)
def test_tetris_parameters_are_checked(params, field):
    with pytest.raises(ValueError, match=field):
        TetrisPolicy(**params)


def test_a_remote_read_holds_bandwidth_at_its_source_and_tetris_respects_it():
    capacity = Resources(8, 8000, disk_read_mbps=100, net_in_mbps=100, net_out_mbps=100)
    hosts = {name: HostState(name, rack, 8, capacity) for name, rack in (("a", 0), ("b", 1))}
    cluster = ClusterState(2, hosts, slowstart=1.0)
    core = SchedulerCore(TetrisPolicy(fairness=0.0), cluster, random.Random(0), replicas=1)
    reader = Resources(1, 100, disk_read_mbps=60, net_in_mbps=60)
    job = build_job(JobSpec("j", 0, 2, 0, 0, 2, 0, 1, 1), reader)
    core.submit(job, 0.0)
    for task in job.maps:  # both blocks on host a
        task.input_block = replace(task.input_block, replicas=("a",))
    cluster.pending["j"] = PendingTasks()
    for task in job.maps:
        cluster.pending["j"].add(task, cluster.rack_of, cluster.alive())
    first = core.policy.next_task(hosts["b"], cluster)
    core._start(first, hosts["b"], 0.0)
    assert hosts["a"].used.net_out_mbps == 60 and hosts["a"].used.disk_read_mbps == 60
    # a second remote read would need 120 of a's 100 Mb/s out: Tetris leaves the container empty
    assert core.policy.next_task(hosts["b"], cluster) is None
    core.task_finished(first.task_id, first.attempt, 1.0)
    assert hosts["a"].used.net_out_mbps == 0
    assert core.policy.next_task(hosts["b"], cluster) is not None


@pytest.mark.parametrize("policy", [FifoPolicy(), DrfPolicy()])
def test_baselines_pass_over_a_job_whose_task_does_not_fit(policy):
    host = HostState("m", 0, 4, Resources(4, 4000))
    cluster = ClusterState(1, {"m": host}, slowstart=1.0)
    core = SchedulerCore(policy, cluster, random.Random(0), replicas=1)
    core.submit(build_job(JobSpec("big", 0, 1, 0, 0, 1, 0, 1, 1), Resources(1, 8000)), 0.0)
    core.submit(build_job(JobSpec("small", 1, 1, 0, 0, 1, 0, 1, 1), Resources(1, 1000)), 0.0)
    assert [launch.task.job_id for launch in core.schedule(0.0)] == ["small"]


def two_racks(policy: Policy) -> tuple[SchedulerCore, dict[str, HostState]]:
    capacity = Resources(4, 4000, disk_read_mbps=100, net_in_mbps=100, net_out_mbps=100)
    hosts = {name: HostState(name, rack, 4, capacity) for name, rack in (("a", 0), ("b", 1))}
    return SchedulerCore(policy, ClusterState(2, hosts, slowstart=1.0), random.Random(0), replicas=1), hosts


def blocks_on(core: SchedulerCore, job_id: str, host: str) -> None:
    """Put every map block of the job on `host` alone."""
    job, pending = core.cluster.jobs[job_id], PendingTasks()
    for task in job.maps:
        task.input_block = replace(task.input_block, replicas=(host,))
        pending.add(task, core.cluster.rack_of, core.cluster.alive())
    core.cluster.pending[job_id] = pending


def test_a_map_holds_what_it_uses_where_it_is_placed():
    core, hosts = two_racks(TetrisPolicy(fairness=0.0))
    core.submit(build_job(JobSpec("j", 0, 2, 0, 0, 2, 0, 1, 1), Resources(1, 100, 40, net_in_mbps=40)), 0.0)
    blocks_on(core, "j", "a")
    local, remote = core.cluster.jobs["j"].maps
    core._start(local, hosts["a"], 0.0)
    assert (hosts["a"].used.disk_read_mbps, hosts["a"].used.net_in_mbps) == (40, 0)  # read from its disk
    core._start(remote, hosts["b"], 0.0)
    assert (hosts["b"].used.disk_read_mbps, hosts["b"].used.net_in_mbps) == (0, 40)  # received from a
    assert (hosts["a"].used.disk_read_mbps, hosts["a"].used.net_out_mbps) == (80, 40)  # a's disk serves both


def test_the_remote_penalty_falls_on_remote_reads_alone():
    """A reduce fetches from wherever its parents ran, wherever it is placed: it competes with a map
    reading its block remotely at its full alignment, and wins on it (without the SRTF term)."""
    core, hosts = two_racks(TetrisPolicy(fairness=0.0, srtf_weight=0.0, barrier=1.0))
    core.submit(build_job(JobSpec("early", 0, 1, 0, 0, 1, 0, 1, 1), Resources(1, 100)), 0.0)
    core.submit(build_job(JobSpec("late", 1, 1, 1, 0, 1, 1, 1, 1), Resources(1, 100)), 0.0)
    blocks_on(core, "early", "a")
    late_map = core.cluster.jobs["late"].maps[0]
    core._start(late_map, hosts["a"], 0.0)
    core.task_finished(late_map.task_id, late_map.attempt, 1.0)
    chosen = core.policy.next_task(hosts["b"], core.cluster)
    assert (chosen.job_id, chosen.kind.value) == ("late", "reduce")
    assert core.policy.next_task(hosts["a"], core.cluster).job_id == "early"  # read locally: no penalty


def test_when_no_job_below_its_share_fits_the_fairness_knob_lets_the_others_offer():
    host = HostState("m", 0, 4, Resources(4, 4000))
    cluster = ClusterState(1, {"m": host}, slowstart=1.0)
    policy = TetrisPolicy(fairness=0.5)
    core = SchedulerCore(policy, cluster, random.Random(0), replicas=1)
    core.submit(build_job(JobSpec("wide", 0, 1, 0, 0, 1, 0, 1, 1), Resources(4, 100)), 0.0)
    core.submit(build_job(JobSpec("narrow", 1, 1, 0, 0, 2, 0, 1, 1), Resources(1, 100)), 0.0)
    core._start(cluster.pending["narrow"].any_map(), host, 0.0)
    assert [j.job_id for j in policy.eligible_jobs(cluster)] == ["wide"]  # furthest below its share
    assert policy.next_task(host, cluster).job_id == "narrow"  # wide needs 4 cores, 3 are free


def test_the_resource_tracker_frees_what_running_tasks_leave_unused_of_their_allotment():
    capacity = Resources(8, 8000, disk_write_mbps=100, net_in_mbps=100)
    host = HostState("m", 0, 8, capacity)
    cluster = ClusterState(1, {"m": host}, slowstart=1.0)
    core = SchedulerCore(TetrisPolicy(fairness=0.0), cluster, random.Random(0), replicas=1)
    writer = Resources(1, 100, disk_write_mbps=80)
    core.submit(build_job(JobSpec("j", 0, 1, 0, 0, 3, 0, 1, 1), writer), 0.0)
    first, second, third = core.cluster.jobs["j"].maps
    core._start(first, host, 0.0)
    assert host.tracked_free() == host.free  # no report yet: as allocated
    host.report_usage(Resources(0, 0, disk_write_mbps=10), now=5.0, window_s=1.0)  # it writes at 10 of its 80
    assert host.tracked_free().disk_write_mbps == pytest.approx(90)
    assert TetrisPolicy(fairness=0.0, usage_tracker=False).next_task(host, cluster) is None  # 160 > 100
    assert core.policy.next_task(host, cluster) is not None
    core._start(second, host, 6.0)  # started after the report: counted at its allotment until the next
    assert host.tracked_free().disk_write_mbps == pytest.approx(10)
    assert core.policy.next_task(host, cluster) is None
    host.report_usage(Resources(0, 0, disk_write_mbps=90), now=6.5, window_s=1.0)  # it started in the window
    assert host.tracked_free().disk_write_mbps == pytest.approx(-70)
    host.report_usage(Resources(0, 0, disk_write_mbps=90), now=8.0, window_s=1.0)
    assert host.tracked_free().disk_write_mbps == pytest.approx(10)
    host.stop(second.task_id)  # done: the report that still shows its 80 leaves them to others at once
    assert host.tracked_free().disk_write_mbps == pytest.approx(90)
    assert core.policy.next_task(host, cluster) is not None
    host.stop(first.task_id)  # what it ended with was under its allotment: nothing is counted below zero
    assert host.tracked_free().disk_write_mbps == pytest.approx(100)


def test_packing_cores_and_memory_alone_over_allocates_the_network():
    """The paper's ablation (§5.3.1): Tetris blind to disks and network starts reduces whose network-in
    demands exceed the host's NIC, as DRF does; the full Tetris never does (Fig. 1's reduces: 1 Gb/s each on
    a 3 Gb/s machine)."""
    for resources, most in (("all", 3000), ("cores_memory", 9000)):
        host = HostState("m", 0, 100, Resources(18, 36_000, net_in_mbps=3000))
        core = SchedulerCore(
            TetrisPolicy(resources=resources), ClusterState(1, {"m": host}, slowstart=0.0), random.Random(0)
        )
        for spec in fig1_jobs():
            core.submit(build_job(spec, Resources()), 0.0)
        core.schedule(0.0)
        assert sum(t.demand.net_in_mbps for t in host.running.values()) == most
