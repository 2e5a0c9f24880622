"""DAG jobs without a network: the stage model's bytes, stage release and notices in the core, the
DAG workload, the Tez-order baselines and DAGPS's online matcher."""

from __future__ import annotations

import random
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridbed.config.scenario import Scenario
from hybridbed.config.validation import SpecError
from hybridbed.experiments.scenarios import validate_scenario
from hybridbed.experiments.simulated import run_simulation
from hybridbed.policies.dag_order import BfsPolicy, CriticalPathPolicy
from hybridbed.policies.dagps import DagpsPolicy, next_priority, overbooking_gain, stage_priorities
from hybridbed.policies.fair import FairPolicy
from hybridbed.policies.tetris import TetrisPolicy
from hybridbed.scheduler.assembly import container
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.dag_paths import stage_critical_paths, stage_levels
from hybridbed.scheduler.model import EvenSplit, Resources, StageSpec, TaskState, build_job, dag_spec, split_evenly
from hybridbed.scheduler.plan_solver import ChargedSolver, Solved
from hybridbed.scheduler.policy import Policy
from hybridbed.workloads.build import build_workload
from hybridbed.workloads.dag import DagShape, dag_jobs
from hybridbed.workloads.tetris_suite import HostBandwidth, SuiteShape
from tests.small_scenarios import small_dag

CONTAINER = Resources(1, 256)


class InstantSolver(ChargedSolver):
    """A schedule usable at the time it was asked for (these tests' clocks stand still)."""

    def take(self, now: float) -> Solved | None:
        solved, self._solved = self._solved, None
        return solved


def dagps(**params) -> DagpsPolicy:
    policy = DagpsPolicy(**params)
    policy.plan_solver = InstantSolver()
    return policy


def diamond(job_id: str = "d", arrival: float = 0.0, queue: str = "default", long_side: float = 1.0):
    """a -> (b, c) -> d: two branches between a fan-out and a fan-in."""
    return dag_spec(
        job_id,
        arrival,
        (
            StageSpec("a", 2, 1.0, (), input_bytes=1000, output_bytes=600),
            StageSpec("b", 3, long_side, (0,), output_bytes=90),
            StageSpec("c", 1, 1.0, (0,), output_bytes=30),
            StageSpec("d", 2, 1.0, (1, 2), output_bytes=10),
        ),
        queue=queue,
    )


def cluster(hosts: int = 4, slots: int = 4, slowstart: float = 0.05) -> ClusterState:
    return ClusterState(
        1, {f"h{i}": HostState(f"h{i}", 0, slots, Resources(slots, slots * 256)) for i in range(hosts)}, slowstart
    )


def finish(core: SchedulerCore, tasks, now: float) -> None:
    for task in tasks:
        core.task_finished(task.task_id, task.attempt, now)


def test_every_byte_of_a_dag_is_accounted_for():
    spec = diamond()
    job = build_job(spec, CONTAINER)
    a, b, c, d = (stage.tasks for stage in job.stages)
    assert sum(t.written_bytes for t in a) == 600 and sum(t.input_block.size_bytes for t in a) == 1000
    assert sum(t.fetch_bytes for t in b) == 300 and sum(t.fetch_bytes for t in c) == 300  # split between children
    assert sum(t.fetch_bytes for t in d) == 120 and sum(t.output_bytes for t in d) == 10
    for task in d:  # fetches from every task of both parent stages
        assert {s.task_id for s in job.sources_of(task)} == {t.task_id for t in b + c}
        assert task.fetch_bytes == sum(s.partition_for(task) for s in b + c)
    assert (spec.input_bytes, spec.shuffle_bytes, spec.output_bytes) == (1000, 720, 10)
    assert (spec.n_maps, spec.n_reduces) == (2, 6)


@settings(max_examples=200, deadline=None)
@given(total=st.integers(0, 10**12), parts=st.integers(1, 1000))
def test_a_lazy_split_gives_the_parts_of_the_listed_one(total, parts):
    split = EvenSplit(total, parts)
    listed = split_evenly(total, parts)
    assert [split.part(i) for i in range(parts)] == listed == split.sizes()
    assert sum(listed) == total and max(listed) - min(listed) <= 1


@settings(max_examples=60, deadline=None)
@given(tasks=st.lists(st.integers(1, 40), min_size=4, max_size=4), shuffle=st.integers(0, 10**9))
def test_every_partition_and_fetch_adds_up_at_any_task_counts(tasks, shuffle):
    """The diamond's stages with other task counts and an intermediate size that splits unevenly: each
    consumer's fetch is the sum of its partitions, each stage's partitions add up to its output, and the
    consumers fetch all of them."""
    stages = (
        StageSpec("a", tasks[0], 0.1, (), input_bytes=10**6, output_bytes=shuffle),
        StageSpec("b", tasks[1], 0.1, (0,), output_bytes=shuffle // 3),
        StageSpec("c", tasks[2], 0.1, (0,), output_bytes=shuffle // 7),
        StageSpec("d", tasks[3], 0.1, (1, 2), output_bytes=5),
    )
    job = build_job(dag_spec("j", 0.0, stages), CONTAINER)
    for consumers in job.stages[1:]:
        for task in consumers.tasks:
            assert task.fetch_bytes == sum(s.partition_for(task) for s in job.sources_of(task))
    for spec, stage in zip(stages[:3], job.stages[:3], strict=True):
        assert sum(t.written_bytes - t.output_bytes for t in stage.tasks) == spec.output_bytes
    assert sum(t.fetch_bytes for t in job.tasks) == sum(spec.output_bytes for spec in stages[:3])


def test_bad_stages_are_refused_by_stage_and_field():
    with pytest.raises(ValueError, match=r"stage 1 \(b\): parents"):
        dag_spec("j", 0, (StageSpec("a", 1, 1.0), StageSpec("b", 1, 1.0, (1,))))
    with pytest.raises(ValueError, match=r"stage 1 \(b\): only a root stage reads input"):
        dag_spec("j", 0, (StageSpec("a", 1, 1.0), StageSpec("b", 1, 1.0, (0,), input_bytes=5)))
    with pytest.raises(ValueError, match="tasks must be at least 1"):
        dag_spec("j", 0, (StageSpec("a", 0, 1.0),))


def test_a_dag_stage_starts_only_when_all_its_parent_stages_are_done():
    state = cluster()
    core = SchedulerCore(FairPolicy(node_delay_s=0, rack_delay_s=0), state, random.Random(1), replicas=1)
    job = build_job(diamond(), CONTAINER)
    core.submit(job, 0.0)
    a, b, c, d = (stage.tasks for stage in job.stages)
    started = core.schedule(0.0)
    assert {launch.task.task_id for launch in started} == {t.task_id for t in a}  # slowstart 0.05 does not apply
    finish(core, a[:1], 1.0)
    assert core.schedule(1.0) == []
    finish(core, a[1:], 2.0)
    assert {launch.task.task_id for launch in core.schedule(2.0)} == {t.task_id for t in b + c}
    notices = core.shuffle_notices()
    assert {(n.consumer.task_id, s.task_id) for n in notices for s in n.sources} == {
        (x.task_id, s.task_id) for x in b + c for s in a
    }
    finish(core, b + c[:0], 3.0)
    assert core.schedule(3.0) == []  # d waits for c too
    finish(core, c, 4.0)
    assert {launch.task.task_id for launch in core.schedule(4.0)} == {t.task_id for t in d}
    assert sum(len(n.sources) for n in core.shuffle_notices()) == len(d) * 4
    finish(core, d, 5.0)
    assert core.finished == [job]


def test_a_lost_host_requeues_the_finished_intermediate_tasks_its_consumers_still_need():
    state = cluster(hosts=2)
    core = SchedulerCore(FairPolicy(node_delay_s=0, rack_delay_s=0), state, random.Random(1), replicas=1)
    job = build_job(diamond(), CONTAINER)
    core.submit(job, 0.0)
    a, b, c, d = (stage.tasks for stage in job.stages)
    core.schedule(0.0)
    finish(core, a, 1.0)
    core.schedule(1.0)
    finish(core, b + c, 2.0)
    core.schedule(2.0)
    lost = d[0].host
    requeued = core.host_lost(lost, 3.0)
    assert {t.task_id for t in requeued} == {t.task_id for t in b + c + d if t.host is None}
    assert all(t.state is TaskState.PENDING for t in requeued)
    assert not any(t in requeued for t in a)  # b and c, not a, are what d fetches from
    assert not state.stage_released(job, 3)


SIX_TEMPLATES = DagShape(templates=6)


def small_dags(n: int, seed: int = 1, shape: DagShape = SIX_TEMPLATES) -> list:
    return dag_jobs(n, random.Random(seed), shape, SuiteShape(block_bytes=1_000_000), HostBandwidth(16, 16, 10), 1.0)


def test_dag_workload_is_reproducible_and_shaped_like_query_plans():
    jobs = small_dags(40)
    assert [j.stages for j in jobs] == [j.stages for j in small_dags(40)]
    depths, shared = [], 0
    for spec in jobs:
        graph = nx.DiGraph([(p, i) for i, s in enumerate(spec.stages) for p in s.parents])
        assert nx.is_directed_acyclic_graph(graph) and nx.is_weakly_connected(graph)
        depths.append(nx.dag_longest_path_length(graph) + 1)
        sinks = [i for i in graph if graph.out_degree(i) == 0]
        assert sinks == [len(spec.stages) - 1] and spec.stages[-1].tasks == 1  # one final sort
        shared += any(graph.out_degree(i) > 1 for i, s in enumerate(spec.stages) if not s.parents)
        job = build_job(spec, CONTAINER)
        for stage in job.stages[1:]:
            produced = sum(t.written_bytes for p in stage.parents for t in job.stages[p].tasks)
            assert produced >= sum(t.fetch_bytes for t in stage.tasks)
    assert min(depths) >= 4 and max(depths) <= 14
    assert shared > 0  # some plans share a scan between two joins: DAGs, not trees
    assert len({j.job_id.split("-")[1] for j in jobs}) > 3  # several templates in use


def test_stage_levels_and_critical_paths_on_the_diamond():
    job = build_job(diamond(long_side=5.0), CONTAINER)
    assert stage_levels(job) == [0, 1, 1, 2]
    assert stage_critical_paths(job) == [7.0, 6.0, 2.0, 1.0]


@pytest.mark.parametrize("policy, expected", [(BfsPolicy(), "c"), (CriticalPathPolicy(), "b")])
def test_tez_orders_pick_the_stage_their_rule_ranks_first(policy: Policy, expected: str):
    """a -> x -> b (long) -> d and a -> c (short) -> d, one container: both take a, then x (level 1, on the
    long path); then b (level 2, long path) and c (level 1, short path) wait: BFS takes c, CP takes b."""
    spec = dag_spec(
        "j",
        0.0,
        (
            StageSpec("a", 1, 1.0, (), 10, 10),
            StageSpec("x", 1, 1.0, (0,), 0, 10),
            StageSpec("b", 1, 9.0, (1,), 0, 10),
            StageSpec("c", 1, 1.0, (0,), 0, 10),
            StageSpec("d", 1, 1.0, (2, 3)),
        ),
    )
    core = SchedulerCore(policy, cluster(hosts=1, slots=1), random.Random(1), replicas=1)
    job = build_job(spec, CONTAINER)
    core.submit(job, 0.0)
    picked = []
    for now in (0.0, 1.0, 2.0):
        task = core.schedule(now)[0].task
        picked.append(job.stages[task.stage].name)
        finish(core, [task], now + 1)
    assert picked == ["a", "x", expected]


def test_dagps_reports_bounds_and_reuses_a_schedule_for_alike_jobs():
    state = cluster()
    policy = dagps(space="cluster")
    core = SchedulerCore(policy, state, random.Random(1), replicas=1)
    for i in range(2):
        core.submit(build_job(diamond(f"d{i}"), CONTAINER), 0.0)
    rows = policy.plan_rows()
    assert [r["schedule_of"] for r in rows] == ["d0", "d0"]
    assert [r["machines"] for r in rows] == [4, 4]
    row = rows[0]
    assert row["new_lb_s"] >= max(row["cp_len_s"], row["t_work_s"]) - 1e-6
    assert row["planned_s"] >= row["new_lb_s"] - 1e-6 and row["cp_len_s"] == 3.0


def test_dagps_builds_schedules_off_the_decision_path_and_uses_them_once_built():
    """In the simulator a schedule is usable from the time it was asked for plus its build's wall time;
    until then the job's tasks are matched without preference (priScore 1), not held back."""
    state = cluster()
    policy = DagpsPolicy()
    core = SchedulerCore(policy, state, random.Random(1), replicas=1)
    core.submit(build_job(diamond("d0", arrival=5.0), CONTAINER), 5.0)
    started = core.schedule(5.0)
    assert started and policy.plan_rows() == []  # the roots start before the schedule is taken
    later = 5.0 + 1.0
    finish(core, [launch.task for launch in started], later)
    assert core.schedule(later)
    [row] = policy.plan_rows()
    assert row["requested_s"] == 5.0 and row["used_from_s"] == later
    assert row["build_wall_s"] < later - 5.0


def test_dagps_plans_a_job_on_its_share_of_the_live_hosts():
    """Fig. 9's capacity available to the job: the live hosts over the jobs not finished, when it arrives."""
    state = cluster(hosts=8)
    policy = dagps()
    core = SchedulerCore(policy, state, random.Random(1), replicas=1)
    core.submit(build_job(diamond("d0"), CONTAINER), 0.0)
    state.lose_host("h7")
    for i in (1, 2):
        core.submit(build_job(diamond(f"d{i}"), CONTAINER), 0.0)
    core.schedule(0.0)  # a decision takes the last schedule built
    assert [r["machines"] for r in policy.plan_rows()] == [8, 3, 2]  # 8 tasks / 1 job, 7 hosts / 2, 7 / 3


def run_alone(policy: Policy, spec, capacity: Resources) -> float:
    """The job on one host where nothing is over-allocated (every task lasts its compute time); its finish time."""
    state = ClusterState(1, {"h": HostState("h", 0, 10, capacity)}, slowstart=1.0)
    core = SchedulerCore(policy, state, random.Random(1), replicas=1)
    job = build_job(spec, CONTAINER)
    core.submit(job, 0.0)
    now, ends = 0.0, {}
    while job.finished_s is None:
        for launch in core.schedule(now):
            assert launch.task.demand.fits_in(
                state.hosts["h"].capacity - state.hosts["h"].used + launch.task.demand, capacity
            )
            ends[launch.task.task_id] = now + launch.task.compute_s
        now = min(ends.values())
        finish(core, [core.tasks[t] for t, end in ends.items() if end <= now], now)
        ends = {t: end for t, end in ends.items() if end > now}
    return job.finished_s


def test_dagps_online_follows_its_schedule_where_tetris_packs_greedily():
    """The DAGPS paper's §2.2 situation online: three long tasks fit together, two behind short tasks that
    cannot run beside a long one. The ready long task aligns better with the empty host (1.0 against 0.8),
    so Tetris starts it and serialises (20.2 s); DAGPS's schedule puts the short tasks first (priScore 1
    and 0.8 against 0.6), and its matcher follows it: all three long tasks overlap (10.2 s)."""
    capacity = Resources(4, 4000, disk_read_mbps=400, disk_write_mbps=400)
    long, short = Resources(1, 1000, 100, 100), Resources(0, 3200)
    spec = dag_spec(
        "j",
        0.0,
        (
            StageSpec("short", 2, 0.1, (), demand=short),
            StageSpec("long-a", 1, 10.0, (), demand=long),
            StageSpec("long-b", 2, 10.0, (0,), demand=long),
        ),
    )
    assert run_alone(TetrisPolicy(), spec, capacity) == pytest.approx(20.2)
    assert run_alone(dagps(), spec, capacity) == pytest.approx(10.2)
    assert run_alone(dagps(pri_score="relative"), spec, capacity) == pytest.approx(10.2)


def test_the_kth_task_of_a_stage_to_start_takes_the_stages_kth_priscore():
    """A stage's tasks are alike, so the schedule orders how many of them start, not which: the next task to
    start takes the best priScore not yet taken, whichever task is best located; a requeued one gives its back."""
    assert stage_priorities({(0, 0): 0.25, (0, 1): 1.0, (0, 2): 0.5, (1, 0): 0.75}) == {
        0: [1.0, 0.5, 0.25],
        1: [0.75],
    }
    priorities = {0: [1.0, 0.5, 0.25]}
    state = cluster(hosts=1, slots=1)
    core = SchedulerCore(FairPolicy(), state, random.Random(1), replicas=1)
    job = build_job(dag_spec("j", 0.0, (StageSpec("a", 3, 1.0, (), input_bytes=300),)), CONTAINER)
    core.submit(job, 0.0)
    [offer] = state.stage_offers(job)
    assert next_priority(priorities, offer) == 1.0 and next_priority(None, offer) == 1.0
    [launch] = core.schedule(0.0)
    [offer] = state.stage_offers(job)
    assert (offer.tasks, offer.pending) == (3, 2) and next_priority(priorities, offer) == 0.5
    core.task_failed(launch.task.task_id, launch.task.attempt, 1.0)
    [offer] = state.stage_offers(job)
    assert next_priority(priorities, offer) == 1.0


@pytest.mark.parametrize("policy", [dagps, TetrisPolicy], ids=["dagps", "tetris"])
def test_a_remote_read_waits_while_its_blocks_host_has_no_room_and_the_next_best_task_starts(policy):
    """The best candidate reads its block from the other host (Tetris §3.2: that host serves the read from
    its disk and NIC); once that host's disk is taken, the policy starts its next best task instead."""
    capacity = Resources(4, 4000, disk_read_mbps=100, disk_write_mbps=100, net_in_mbps=100, net_out_mbps=100)

    def first_choice(source_busy: bool) -> str:
        state = ClusterState(1, {n: HostState(n, 0, 4, capacity) for n in ("h0", "h1")}, slowstart=1.0)
        core = SchedulerCore(FairPolicy(), state, random.Random(1), replicas=1)
        wide = StageSpec("read", 1, 1.0, (), input_bytes=1000, demand=Resources(2, 2000, disk_read_mbps=50))
        core.submit(build_job(dag_spec("reader", 0.0, (wide,)), CONTAINER), 0.0)
        core.submit(build_job(dag_spec("small", 0.0, (StageSpec("s", 1, 100.0, ()),)), CONTAINER), 0.0)
        [source] = state.jobs["reader"].maps[0].input_block.replicas
        if source_busy:
            state.hosts[source].hold("ingest", Resources(0, 0, disk_read_mbps=100, net_out_mbps=100))
        asking = state.hosts["h1" if source == "h0" else "h0"]
        return policy().next_task(asking, state).job_id

    assert first_choice(source_busy=False) == "reader"
    assert first_choice(source_busy=True) == "small"


def test_overbooking_pays_when_more_tasks_progress_on_the_overbooked_disk():
    host = HostState("h", 0, 10, Resources(8, 8000, disk_read_mbps=100))
    cluster_ = ClusterState(1, {"h": host}, slowstart=1.0)
    core = SchedulerCore(FairPolicy(), cluster_, random.Random(1), replicas=1)
    core.submit(
        build_job(dag_spec("busy", 0.0, (StageSpec("a", 2, 1.0, (), demand=Resources(1, 100, 50)),)), CONTAINER), 0.0
    )
    core.schedule(0.0)
    assert host.used.disk_read_mbps == 100
    # two tasks at full rate before; three at 100/120 of theirs after: 2.5 tasks' progress, 0.5 gained
    assert overbooking_gain(Resources(1, 100, 20), host) == pytest.approx(0.5)
    assert overbooking_gain(Resources(1, 100, 80), host) == 0  # three at 1/1.8: fewer than two
    assert overbooking_gain(Resources(1, 100, 0, 0, 10), host) == 0  # fits: nothing to overbook
    core.submit(
        build_job(dag_spec("more", 0.0, (StageSpec("a", 1, 1.0, (), demand=Resources(1, 100, 20)),)), CONTAINER), 0.0
    )
    core.schedule(0.0)  # Fair over-allocates: three tasks at 100/120 of their rate
    assert overbooking_gain(Resources(1, 100, 10), host) == pytest.approx(4 / 1.3 - 3 / 1.2)


def test_dagps_overbooks_disk_only_when_no_task_fits_and_it_pays():
    """Lexicographic (§5): a task that fits beats every overbooking one, whatever their priScores; a task
    that fits only by overbooking the disk starts when it gains task progress, and never past the cores."""
    capacity = Resources(4, 4000, disk_read_mbps=100)

    def launched(policy: DagpsPolicy, stages) -> list[str]:
        state = ClusterState(1, {"h": HostState("h", 0, 10, capacity)}, slowstart=1.0)
        core = SchedulerCore(policy, state, random.Random(1), replicas=1)
        job = build_job(dag_spec("j", 0.0, stages), CONTAINER)
        core.submit(job, 0.0)
        return [job.stages[launch.task.stage].name for launch in core.schedule(0.0)]

    disk = (StageSpec("disk", 4, 10.0, (), demand=Resources(1, 100, 40)),)
    # two fit (80 of 100); a third overbooks: 3 at 100/120 = 2.5 > 2; a fourth 4 at 100/160 = 2.5, no gain
    assert launched(dagps(), disk) == ["disk"] * 3
    assert launched(dagps(overbooking=False), disk) == ["disk"] * 2
    with_cpu = (*disk, StageSpec("cpu", 1, 10.0, (), demand=Resources(1, 100)))
    # planned on two machines, every task starts at 0 and the cpu task ranks last (priScore 0.2): the third
    # disk task scores 0.6 x 0.5 by overbooking, the cpu task 0.2 x 0.15 by fitting, and goes first
    names = launched(dagps(space_hosts=2), with_cpu)
    assert names.index("cpu") < [i for i, n in enumerate(names) if n == "disk"][2]
    assert sorted(names) == ["cpu", "disk", "disk", "disk"]  # the fourth core: the disk stays at 3 tasks


def test_dagps_deficit_counters_bound_what_one_queue_takes_from_another():
    """Queue q1 has many short jobs (low srpt, preferred), q0 one long job; a tight unfairness bound makes
    q0 get tasks early, a loose one lets q1 take every container first."""

    def launches(unfairness: float) -> list[str]:
        state = cluster(hosts=1, slots=8)
        core = SchedulerCore(dagps(srpt_weight=5.0, unfairness=unfairness), state, random.Random(1), replicas=1)
        core.submit(build_job(diamond("long", queue="q0", long_side=50.0), CONTAINER), 0.0)
        for i in range(4):
            core.submit(
                build_job(dag_spec(f"s{i}", 0.0, (StageSpec("a", 2, 1.0, (), 10, 10),), queue="q1"), CONTAINER), 0.0
            )
        return [state.jobs[launch.task.job_id].spec.queue for launch in core.schedule(0.0)]

    tight, loose = launches(0.01), launches(10.0)
    assert loose[:8] == ["q1"] * 8
    assert "q0" in tight[:4]


def test_a_dag_workload_runs_in_the_simulator_with_strict_precedence(tmp_path: Path):
    import pandas as pd

    scenario = small_dag(
        "simulation",
        {
            "jobs": 4,
            "arrival_window_s": 20,
            "dag": {"templates": 3, "fact_tasks": 4, "max_tasks": 4},
            "suite": {"cpu_heavy_s": 2},
        },
        max_duration_s=3000,
    )
    summary = run_simulation(scenario, tmp_path / "run")
    assert summary["status"] == "done" and summary["jobs_done"] == 4
    tasks = pd.read_csv(tmp_path / "run" / "tasks.csv").set_index("task_id")
    for spec in build_workload(scenario):
        job = build_job(spec, container(scenario))
        for stage in job.stages:
            for task in stage.tasks:
                row = tasks.loc[task.task_id]
                assert row.fetched_bytes == task.fetch_bytes
                for source in job.sources_of(task):
                    assert tasks.loc[source.task_id].finish_s <= row.start_s + 1e-9
    plan = pd.read_csv(tmp_path / "run" / "plan.csv")
    assert len(plan) == 4 and (plan.planned_s >= plan.new_lb_s - 1e-3).all()


def test_dag_workload_knobs_are_checked_by_name():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="size_factors must be positive"):
        Scenario.model_validate(
            {
                "name": "x",
                "fabric": {"racks": 2, "hosts_per_rack": 1},
                "workload": {"source": "dag", "dag": {"size_factors": [1, -2]}},
            }
        )
    with pytest.raises(SpecError, match="policy_params.dagps: .*space_hosts: .*greater than or equal to 1"):
        validate_scenario(
            {
                "name": "x",
                "fabric": {"racks": 2, "hosts_per_rack": 1},
                "scheduler": {"policy": "dagps", "policy_params": {"dagps": {"space_hosts": 0}}},
            }
        )
