"""DSP's plan (MILP and list schedule), the dependency and deadline metrics, and DSP with its baselines on
a small DAG workload in the simulator."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridbed.experiments.simulated import run_simulation
from hybridbed.policies.aalo import AaloPolicy
from hybridbed.policies.dsp import DspPolicy, _Priorities
from hybridbed.policies.fifo import FifoPolicy
from hybridbed.policies.planning.dsp_schedule import PlanHost, PlanTask, list_schedule, objective, plan
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.dag_paths import stage_critical_paths
from hybridbed.scheduler.model import Resources, StageSpec, build_job, dag_spec
from hybridbed.scheduler.policy import Preemption
from hybridbed.workloads.deadlines import with_deadlines
from tests.small_scenarios import small_dsp

CONTAINER = Resources(1, 256)


def test_the_list_schedule_keeps_dependencies_and_cores():
    tasks = [
        PlanTask("a0", "j", "a", (), 4.0, 2, 0.0, 100.0),
        PlanTask("a1", "j", "a", (), 2.0, 2, 0.0, 100.0),
        PlanTask("b0", "j", "b", ("a",), 1.0, 1, 0.0, 100.0),
    ]
    starts = list_schedule(tasks, [PlanHost("h0", 2, 4), PlanHost("h1", 2, 4, busy=((3.0, 2),))], 0.0)
    assert starts["a0"] == ("h0", 0.0)  # h1 is busy until 3
    assert starts["a1"] == ("h1", 3.0)
    assert starts["b0"][1] == 5.0  # after the last task of group a ends


def test_the_milp_finds_the_schedule_that_meets_a_deadline_the_list_schedule_misses():
    """Two cores; a 2-core task of a relaxed job comes first in the list, a chain of two 1-core tasks with
    a close deadline second. The list schedule runs the big task first and the chain misses its deadline
    by 9 s (objective 21 + 9); the MILP runs the chain first, beside nothing, and meets it (21)."""
    tasks = [
        PlanTask("big", "A", "a", (), 10.0, 2, 0.0, 100.0),
        PlanTask("b1", "B", "b1", (), 1.0, 1, 0.0, 12.0),
        PlanTask("b2", "B", "b2", ("b1",), 10.0, 1, 0.0, 12.0),
    ]
    hosts = [PlanHost("h", 2, 4)]
    greedy = list_schedule(tasks, hosts, 0.0)
    assert objective(tasks, greedy, 0.0) == pytest.approx(30.0)
    schedule = plan(tasks, hosts, 0.0, time_limit_s=10.0, buckets=21)
    assert schedule.solver == "milp"
    assert schedule.objective == pytest.approx(21.0)
    assert schedule.starts["b2"][1] + 10.0 <= 12.0


def test_the_plan_falls_back_to_the_list_schedule_without_time_for_the_milp():
    tasks = [PlanTask(f"t{i}", "j", "g", (), 1.0, 1, 0.0, 10.0) for i in range(3)]
    schedule = plan(tasks, [PlanHost("h", 1, 4)], 0.0, time_limit_s=0.0)
    assert schedule.solver == "list" and schedule.objective == pytest.approx(3.0)


def chain(job_id: str, arrival: float = 0.0):
    return dag_spec(
        job_id,
        arrival,
        (StageSpec("a", 2, 4.0, (), input_bytes=100, output_bytes=10), StageSpec("b", 1, 2.0, (0,), output_bytes=10)),
    )


def test_the_plan_serves_stages_by_priority_never_before_a_pending_parent():
    """Eq. 12 ranks a deep job's roots above a shallow job's tasks (each level below multiplies by γ + 1),
    so on one container the deep job, though it arrived later, starts first. A job already past its
    deadline has negative leaf priorities and so a child stage above its parent: the plan still lists
    the parent stage first."""
    shallow = dag_spec("a-shallow", 0.0, (StageSpec("a", 2, 4.0, (), input_bytes=100, output_bytes=10),))
    deep = dag_spec(
        "b-deep",
        0.5,
        (
            StageSpec("a", 1, 4.0, (), input_bytes=100, output_bytes=10),
            StageSpec("b", 1, 4.0, (0,), output_bytes=10),
            StageSpec("c", 1, 4.0, (1,), output_bytes=10),
        ),
    )
    cluster = ClusterState(1, {"h": HostState("h", 0, 1, Resources(1, 256))}, 1.0)
    policy = DspPolicy()
    core = SchedulerCore(policy, cluster, random.Random(1))
    core.submit(build_job(shallow, CONTAINER), 0.0)
    core.submit(build_job(deep, CONTAINER), 0.5)
    core.act(0.5)
    assert core.schedule(0.5)[0].task.job_id == "b-deep"

    late = replace(chain("late"), deadline_s=0.1)  # leaves at -0.2 x their overdue time: below zero
    cluster = ClusterState(1, {"h": HostState("h", 0, 4, Resources(4, 1024))}, 1.0)
    policy = DspPolicy()
    core = SchedulerCore(policy, cluster, random.Random(1))
    job = build_job(late, CONTAINER)
    core.submit(job, 0.0)
    core.act(0.0)
    tasks, _, _ = policy._plan_inputs(cluster)
    assert [t.group for t in tasks] == ["late/0", "late/0", "late/1"]
    priorities = _Priorities(policy, cluster)
    assert priorities.of(job.stages[1].tasks[0]) > priorities.of(job.stages[0].tasks[0])


def test_deadlines_are_the_critical_path_times_a_slack_drawn_from_the_range():
    specs = [chain(f"j{i}", arrival=10.0 * i) for i in range(20)]
    dated = with_deadlines(specs, random.Random(1), (1.5, 3.0), CONTAINER)
    path = max(stage_critical_paths(build_job(specs[0], CONTAINER)))
    assert path == pytest.approx(6.0)
    factors = [(d.deadline_s - d.arrival_s) / path for d in dated]
    assert all(1.5 <= f <= 3.0 for f in factors) and max(factors) - min(factors) > 0.5
    assert [d.job_id for d in dated] == [s.job_id for s in specs]


def test_a_task_waits_while_it_could_run_and_not_before():
    """One 1-container host: the second root task waits 4 s for the first; the child stage's task becomes
    ready when both are done and starts at once."""
    cluster = ClusterState(1, {"h": HostState("h", 0, 1, Resources(1, 256))}, 1.0)
    core = SchedulerCore(FifoPolicy(), cluster, random.Random(1))
    job = build_job(chain("j"), CONTAINER)
    core.submit(job, 0.0)
    first = core.schedule(0.0)[0].task
    core.task_finished(first.task_id, 0, 4.0)
    second = core.schedule(4.0)[0].task
    core.task_finished(second.task_id, 0, 8.0)
    child = core.schedule(8.0)[0].task
    assert (first.waited_s, second.waited_s, child.waited_s) == (0.0, 4.0, 0.0)
    assert job.stage_ready_s == [0.0, 8.0] and job.disorders == 0


class ScriptedPreemptions(FifoPolicy):
    """FIFO that preempts what the test tells it to, once."""

    def __init__(self) -> None:
        super().__init__()
        self.next: list[Preemption] = []

    def preempt(self, cluster: ClusterState) -> list[Preemption]:
        preemptions, self.next = self.next, []
        return preemptions


def test_a_resumed_task_has_left_what_it_had_left_when_suspended():
    """A 4 s task suspended after 2 s and resumed 10 s later still needs 2 s (its time suspended is not run)."""
    cluster = ClusterState(1, {"h": HostState("h", 0, 1, Resources(1, 256))}, 1.0)
    policy = ScriptedPreemptions()
    core = SchedulerCore(policy, cluster, random.Random(1))
    core.submit(build_job(chain("j"), CONTAINER), 0.0)
    task = core.schedule(0.0)[0].task
    assert DspPolicy._remaining_s(task, 1.0) == pytest.approx(3.0)
    policy.next = [Preemption(task, "suspend")]
    core.act(2.0)
    assert DspPolicy._remaining_s(task, 7.0) == pytest.approx(2.0)
    policy.next = [Preemption(task, "resume")]
    core.act(12.0)
    assert DspPolicy._remaining_s(task, 12.0) == pytest.approx(2.0)
    assert DspPolicy._remaining_s(task, 13.0) == pytest.approx(1.0)
    policy.next = [Preemption(task, "suspend")]  # a second suspension adds to the first
    core.act(13.0)
    policy.next = [Preemption(task, "resume")]
    core.act(20.0)
    assert DspPolicy._remaining_s(task, 20.5) == pytest.approx(0.5)


def test_aalo_moves_a_job_down_its_queues_as_it_is_served():
    policy = AaloPolicy(queues=3, first_queue_core_s=10.0, multiplier=10.0)
    cluster = ClusterState(1, {"h": HostState("h", 0, 4, Resources(4, 1024))}, 1.0)
    core = SchedulerCore(policy, cluster, random.Random(1))
    small, big = (
        build_job(chain("small"), CONTAINER),
        build_job(dag_spec("big", 0.0, (StageSpec("a", 30, 4.0, (), input_bytes=100, output_bytes=10),)), CONTAINER),
    )
    core.submit(small, 0.0)
    core.submit(big, 0.0)
    assert policy.queue_of(small, cluster) == policy.queue_of(big, cluster) == 0
    for task in small.stages[0].tasks:  # 2 tasks x 1 core x 4 s handed out
        core._start(task, cluster.hosts["h"], 0.0)
    assert policy.attained_core_s(small, cluster) == pytest.approx(8.0) and policy.queue_of(small, cluster) == 0
    core._start(big.stages[0].tasks[0], cluster.hosts["h"], 0.0)
    core._start(big.stages[0].tasks[1], cluster.hosts["h"], 0.0)
    core.task_finished(small.stages[0].tasks[0].task_id, 0, 4.0)
    core.task_finished(small.stages[0].tasks[1].task_id, 0, 4.0)
    core._start(small.stages[1].tasks[0], cluster.hosts["h"], 4.0)
    assert policy.queue_of(small, cluster) == 1  # 10 core-seconds
    assert policy.queue_of(big, cluster) == 0 and policy.job_order(cluster)[0] is big  # the less served goes first
    for task in big.stages[0].tasks[2:]:
        core._start(task, cluster.hosts["h"], 5.0)
    assert policy.queue_of(big, cluster) == 2  # 120 core-seconds: beyond 100, the last queue


@pytest.fixture(scope="module")
def dsp_runs(tmp_path_factory) -> dict[str, Path]:
    """The small DSP scenario under each policy."""
    out = tmp_path_factory.mktemp("dsp")
    for policy in ("dsp", "tetris", "tetris-nodep", "amoeba", "srpt"):
        run_simulation(small_dsp(policy), out / policy)
    return {policy: out / policy for policy in ("dsp", "tetris", "tetris-nodep", "amoeba", "srpt")}


def test_dsp_preempts_keeps_every_dependency_and_resumes_what_it_suspends(dsp_runs):
    jobs = pd.read_csv(dsp_runs["dsp"] / "jobs.csv")
    actions = pd.read_csv(dsp_runs["dsp"] / "preemptions.csv")["action"].value_counts()
    assert len(jobs) == 8 and jobs["disorders"].sum() == 0
    assert actions.get("suspend", 0) > 0
    assert actions.get("resume", 0) == actions["suspend"]  # every suspended task went on
    assert pd.read_csv(dsp_runs["dsp"] / "plan.csv")["solver"].isin(["milp", "list"]).all()


def test_only_the_dependency_blind_policies_start_tasks_before_their_parents_are_done(dsp_runs):
    disorders = {p: pd.read_csv(d / "jobs.csv")["disorders"].sum() for p, d in dsp_runs.items()}
    assert disorders["tetris"] == 0 and disorders["dsp"] == 0
    assert disorders["tetris-nodep"] > 0
    tasks = pd.read_csv(dsp_runs["tetris-nodep"] / "tasks.csv")
    assert len(tasks) == len(pd.read_csv(dsp_runs["tetris"] / "tasks.csv"))  # the same work, all of it done


def test_srpt_kills_and_restarts_where_amoeba_suspends(dsp_runs):
    srpt = pd.read_csv(dsp_runs["srpt"] / "preemptions.csv")["action"]
    amoeba = pd.read_csv(dsp_runs["amoeba"] / "preemptions.csv")["action"]
    assert set(srpt) == {"kill"} and "kill" not in set(amoeba)
    restarted = pd.read_csv(dsp_runs["srpt"] / "tasks.csv")["attempt"]
    assert (restarted > 0).sum() > 0  # killed tasks finished as later attempts


def test_the_allocation_timeline_and_summary_carry_the_new_metrics(dsp_runs):
    timeline = pd.read_csv(dsp_runs["dsp"] / "allocation.csv")
    assert timeline["time_s"].is_monotonic_increasing
    assert timeline["cores_allocated"].between(0, 1).all() and timeline["cores_allocated"].max() > 0.5
    assert timeline["suspended_tasks"].max() > 0
    summary = pd.read_json(dsp_runs["dsp"] / "summary.json", typ="series")
    assert 0 <= summary["deadlines_met"] <= summary["deadline_jobs"] == 8
    assert summary["job_wait_mean_s"] >= 0 and 0 < summary["cores_allocated_mean"] < 1


def earliest_by_definition(
    intervals: list[tuple[float, float, float]], host: PlanHost, ready: float, task: PlanTask
) -> float:
    """The first of `ready` and the ends after it at which the task fits: at its start and at every start
    of an interval during it, the cores and containers in use leave it room."""
    for t in sorted({ready, *(e for _, e, _ in intervals if e > ready)}):
        points = [t] + [s for s, _, _ in intervals if t < s < t + task.duration_s]
        active = [[c for s, e, c in intervals if s <= p < e] for p in points]
        if all(sum(a) + task.cores <= host.cores + 1e-9 and len(a) < host.slots for a in active):
            return t
    return math.inf


def exhaustive_list_schedule(tasks: list[PlanTask], hosts: list[PlanHost], now: float) -> dict[str, tuple[str, float]]:
    """The list schedule by its definition: every host's earliest start, the earliest of all, the first host
    on a tie."""
    placed = [[(now, end, cores) for end, cores in h.busy if end > now] for h in hosts]
    group_end: dict[str, float] = {}
    starts = {}
    for task in tasks:
        ready = max([task.ready_s, now] + [group_end.get(g, now) for g in task.after])
        start, line = min((earliest_by_definition(placed[i], h, ready, task), i) for i, h in enumerate(hosts))
        placed[line].append((start, start + task.duration_s, task.cores))
        starts[task.key] = (hosts[line].name, start)
        group_end[task.group] = max(group_end.get(task.group, now), start + task.duration_s)
    return starts


@given(st.integers(0, 10_000))
@settings(max_examples=60, deadline=None)
def test_the_list_schedules_search_over_hosts_finds_what_an_exhaustive_one_finds(seed):
    rng = random.Random(seed)
    hosts = [
        PlanHost(
            f"h{i}", 4, 3, tuple((rng.choice([2.0, 5.0, 9.0]), rng.choice([1, 2])) for _ in range(rng.randint(0, 3)))
        )
        for i in range(rng.randint(1, 5))
    ]
    hosts = [h for h in hosts if sum(c for _, c in h.busy) <= 4 and len(h.busy) <= 3] or [PlanHost("h", 4, 3)]
    tasks = [
        PlanTask(
            f"t{k}",
            "j",
            f"g{k // 3}",
            (f"g{k // 3 - 1}",) if k >= 3 else (),
            rng.choice([1.0, 3.0]),
            rng.choice([1, 2, 4]),
            0.0,
            50.0,
        )
        for k in range(rng.randint(1, 9))
    ]
    assert list_schedule(tasks, hosts, 0.0) == exhaustive_list_schedule(tasks, hosts, 0.0)
