"""DSP (Liu et al., "Leveraging dependency in scheduling and preemption for high throughput in
data-parallel clusters"): a plan per unit period, then dependency-aware preemption every epoch; and the
preemption baselines of its evaluation (§V), which start from the same plan.

Plan (§III): every `period_s` the pending tasks get a target host and a start time
(`planning.dsp_schedule`: a time-indexed MILP with HiGHS under a time limit, the list schedule when it has
nothing better), solved off the decision path (`plan_solver`: decisions go on with the plan in force
until the new one is taken); a job arriving between periods is list-scheduled into the plan at once. A
plan holds the `plan_tasks` pending tasks of highest priority (Eqs. 12-13 over each job's unfinished
stages, never a stage before a pending parent stage; 400: the paper's jobs of thousands of tasks are beyond
any MILP); when fewer than half of them still wait, the next ones are list-scheduled in. Each host serves
its queue in planned start order, a task once its parent stages are done; a host whose queue has nothing
it can start takes the earliest planned task another host has not started (work conservation; the paper
leaves idle hosts unsaid).

Preemption (§IV, Alg. 1), every `epoch_s`, on each host that lacks the cores for a waiting task of its
queue: priorities by Eqs. 12-13 (`planning.dsp`) over each job's unfinished tasks; running tasks whose
allowable wait exceeds the epoch may be suspended. First every urgent waiting task (allowable wait ≤ ε) or
one that has waited τ or more suspends the lowest-priority running task it does not depend on; then the
first δ of the waiting tasks each suspend the lowest-priority running task when the difference of their
priorities is over ρ times the mean gap between neighbouring priorities (the normalised rule, P̂ > ρ·P̄).
A suspended task keeps its container and memory and resumes, after the recovery overhead, when its host
has cores again, before that host starts anything new. Values the paper leaves open, chosen here:
ε = one epoch (a task that cannot wait another epoch is urgent), ρ = 2, τ = 0.05 of the unit period (the
paper's 0.05 read in units of the period: 0.05 s would make every waiting task preempt at every epoch),
epoch 2 s; a task started or resumed within the last epoch is not preempted (no ping-pong). Deadlines come
from the workload (`workload.deadline_slack`); a job without one gets twice its critical path.

Baselines (same plan and dispatch, other preemption; none checks dependencies, so a waiting task may
preempt for a child whose parents are not done, which starts early and waits for them: a disorder):
- `dsp-nopp`: DSP without the normalised rule (DSPW/oPP);
- `amoeba`: the longest remaining time has the lowest priority; suspend;
- `natjam`: production jobs (deadline within `production_slack` × critical path) preempt research jobs;
  the victim has the most cores, then the latest deadline, then the least remaining time; suspend;
- `srpt`: priority α·waited − β·remaining (α 0.5, β 1); no checkpoint: the victim is killed, restarting
  from scratch.
A task started early that waits for a suspended parent on its host gives its cores back to it (else the
two would wait for each other).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import ClassVar, Literal

import networkx as nx
from pydantic import Field

from hybridbed.policies.planning import dsp as priorities_model
from hybridbed.policies.planning.dsp_schedule import PlanHost, PlanTask, Schedule, plan
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.dag_paths import stage_critical_paths
from hybridbed.scheduler.model import Job, Task, TaskState
from hybridbed.scheduler.policy import Policy, PolicyParams, Preemption
from hybridbed.scheduler.transfers import expected_duration_s

MIN_LEFT_S = 1e-3


@dataclass(frozen=True)
class JobInfo:
    deadline_s: float
    ancestors: list[set[int]]  # per stage: the stages it depends on, directly or not
    production: bool  # Natjam's class: a deadline within production_slack x its critical path


@dataclass
class Budget:
    """What a host can give a preempting task in this round: free cores, memory, containers."""

    cores: float
    memory_mb: float
    slots: int

    def admits(self, task: Task, freed_cores: float = 0.0) -> bool:
        return (
            self.cores + freed_cores >= task.demand.cores - 1e-9
            and self.memory_mb >= task.demand.memory_mb - 1e-9
            and self.slots >= 1
        )

    def take(self, task: Task, freed_cores: float = 0.0) -> None:
        self.cores += freed_cores - task.demand.cores
        self.memory_mb -= task.demand.memory_mb
        self.slots -= 1


class DspParams(PolicyParams):
    period_s: float = Field(default=60.0, gt=0, description="the unit period a plan covers (§III; hybridbed's choice)")
    epoch_s: float = Field(default=2.0, gt=0, description="how often Alg. 1 runs (§IV; hybridbed's choice)")
    milp_time_limit_s: float = Field(
        default=5.0, ge=0, description="HiGHS's time limit on a period's MILP (0: list scheduling only)"
    )
    buckets: int = Field(default=12, gt=0, description="time slots of the time-indexed MILP")
    delta: float = Field(
        default=0.35,
        gt=0,
        le=1,
        description="δ, the share of waiting tasks that may preempt by the normalised rule (Table II: 0.35)",
    )
    tau_periods: float = Field(
        default=0.05,
        ge=0,
        description="τ in unit periods: a task waiting this long preempts (§IV's 0.05, read in periods)",
    )
    rho: float = Field(
        default=2.0,
        ge=1,
        description="ρ, the normalised rule's bound over the mean priority gap "
        "(the paper leaves it open; hybridbed's 2)",
    )
    gamma: float = Field(default=priorities_model.GAMMA, gt=0, lt=1, description="γ of Eq. 12 (the paper's 0.5)")
    omega: tuple[float, float, float] = Field(
        default=priorities_model.OMEGA, description="ω of Eq. 13 (Table II: 0.5 / 0.3 / 0.2)"
    )
    epsilon_s: float | None = Field(
        default=None, description="ε: a task with less allowable wait is urgent (default: one epoch)"
    )
    default_slack: float = Field(
        default=2.0, gt=0, description="a job without a deadline gets this many critical paths"
    )
    production_slack: float = Field(
        default=2.0, gt=0, description="Natjam: a job with a deadline within this many critical paths is production"
    )
    plan_tasks: int = Field(
        default=400,
        gt=0,
        description="the pending tasks of highest priority a plan holds (the paper's jobs of "
        "thousands of tasks are beyond any MILP)",
    )


class SrptParams(DspParams):
    alpha: float = Field(default=0.5, description="SRPT priority: alpha x waited - beta x remaining")
    beta: float = Field(default=1.0, description="SRPT priority: the weight of the remaining time")


class DspPolicy(Policy):
    name = "dsp"
    summary = "DSP: MILP plan per unit period, dependency-aware preemption (Alg. 1) every epoch"
    respects_precedence = False  # the core lets a preempting task start early; DSP's own rules never do
    action: ClassVar[Literal["suspend", "kill"]] = "suspend"  # what a preemption does to its victim
    Params = DspParams
    params: DspParams

    def __init__(self, **params: object):
        super().__init__(**params)
        p = self.params
        self.tau_s = p.tau_periods * p.period_s
        self.epsilon_s = p.epoch_s if p.epsilon_s is None else p.epsilon_s
        self._beyond_plan = False  # pending tasks were left out of the plan (it holds plan_tasks at most)
        self._info: dict[str, JobInfo] = {}
        self._queues: dict[str, list[Task]] = {}  # host -> its planned tasks, by start
        self._order: list[Task] = []  # every planned task, by start
        self._replan = False  # a job arrived: list-schedule it into the plan
        self._arrived_since_request = False  # a job arrived after the MILP plan under way was asked for
        self._requested: dict[str, Task] = {}  # the tasks of the MILP plan under way
        self._next_period = 0.0
        self._next_epoch = 0.0
        self._promised: dict[str, list[Task]] = {}  # host -> tasks to start there, for which others were preempted
        self._quiet_until: dict[str, float] = {}  # task -> not preempted before
        self._periods: list[dict] = []
        self._acted: set[str] = set()  # tasks suspended or resumed in this round: not victims again
        self._held: dict[str, Task] = {}  # tasks it suspended (until resumed, killed or done)

    # planning -------------------------------------------------------------------------------------
    def job_arrived(self, job: Job, cluster: ClusterState) -> None:
        for done in [j for j in self._info if j in cluster.finished]:
            del self._info[done]
        self._quiet_until = {k: until for k, until in self._quiet_until.items() if until > cluster.now}
        path = max(stage_critical_paths(job))
        spec = job.spec
        deadline = spec.deadline_s if spec.deadline_s is not None else spec.arrival_s + self.params.default_slack * path
        graph = nx.DiGraph()
        graph.add_nodes_from(range(len(job.stages)))
        graph.add_edges_from((p, i) for i, stage in enumerate(job.stages) for p in stage.parents)
        self._info[job.job_id] = JobInfo(
            deadline,
            [nx.ancestors(graph, i) for i in graph],
            deadline - spec.arrival_s <= self.params.production_slack * path,
        )
        self._replan = True
        self._arrived_since_request = True

    def _plan_inputs(self, cluster: ClusterState) -> tuple[list[PlanTask], dict[str, Task], list[PlanHost]]:
        """What a plan is made of: the pending tasks (by stage, highest priority first, parents before
        children, at most `plan_tasks`), each with the time its parents are expected to end, and the hosts'
        free capacity over time."""
        now = cluster.now
        limit = self.params.plan_tasks
        tasks: list[PlanTask] = []
        keyed: dict[str, Task] = {}
        for job, stage, pending_parents in self._groups_by_priority(cluster):
            if len(tasks) > limit:
                break  # enough to know that some are left out
            running_parents = (
                s
                for p in job.stages[stage].parents
                for s in job.stages[p].tasks
                if s.state in (TaskState.RUNNING, TaskState.SUSPENDED)
            )
            ready = max([now] + [self._expected_end(s, now) for s in running_parents])
            group, after = f"{job.job_id}/{stage}", tuple(f"{job.job_id}/{p}" for p in pending_parents)
            deadline = self._info[job.job_id].deadline_s
            for task in job.stages[stage].tasks:
                if task.state is TaskState.PENDING:
                    tasks.append(
                        PlanTask(
                            task.task_id,
                            job.job_id,
                            group,
                            after,
                            expected_duration_s(task),
                            task.demand.cores,
                            ready,
                            deadline,
                        )
                    )
                    keyed[task.task_id] = task
        self._beyond_plan = len(tasks) > limit
        tasks = tasks[:limit]
        keyed = {t.key: keyed[t.key] for t in tasks}
        hosts = [
            PlanHost(
                h.name,
                h.capacity.cores,
                h.slots,
                tuple((self._expected_end(t, now), t.allocation.cores) for t in h.running.values()),
            )
            for h in cluster.hosts.values()
            if h.alive
        ]
        return tasks, keyed, hosts

    def _groups_by_priority(self, cluster: ClusterState) -> list[tuple[Job, int, list[int]]]:
        """The stages with pending tasks, each with its parent stages that have pending tasks too, in the
        order a plan lists them: highest priority first (Eqs. 12-13 over each job's DAG of unfinished stages,
        a stage at its tasks' mean remaining time and longest wait: a plan orders stages, and the task-level
        DAG of every job took a second at 15K pending tasks), never a stage before a pending parent stage
        (the list schedule places a stage after its parents)."""
        times = _Priorities(self, cluster)
        graph = nx.DiGraph()
        rank: dict[tuple[str, int], tuple] = {}
        for job in cluster.jobs.values():
            pending = {t.stage for t in job.tasks if t.state is TaskState.PENDING}
            priority = self._stage_priorities(job, times)
            for stage in pending:
                rank[(job.job_id, stage)] = (-priority[stage], job.spec.arrival_s, job.job_id, stage)
                graph.add_node((job.job_id, stage))
                graph.add_edges_from(
                    ((job.job_id, p), (job.job_id, stage)) for p in job.stages[stage].parents if p in pending
                )
        order = nx.lexicographical_topological_sort(graph, key=rank.__getitem__)
        return [
            (cluster.jobs[job_id], stage, [p for _, p in graph.predecessors((job_id, stage))])
            for job_id, stage in order
        ]

    def _stage_priorities(self, job: Job, times: _Priorities) -> dict[int, float]:
        """Eqs. 12-13 over the job's unfinished stages."""
        unfinished: dict[int, list[Task]] = {}
        for task in job.tasks:
            if task.state is not TaskState.DONE:
                unfinished.setdefault(task.stage, []).append(task)
        dag = nx.DiGraph()
        for stage, tasks in unfinished.items():
            dag.add_node(stage, duration=expected_duration_s(tasks[0]), stage=stage)
            dag.add_edges_from((p, stage) for p in job.stages[stage].parents if p in unfinished)
        remaining = {s: sum(times.remaining_s(t) for t in tasks) / len(tasks) for s, tasks in unfinished.items()}
        waited = {s: max(times.waited_s(t) for t in tasks) for s, tasks in unfinished.items()}
        p = self.params
        deadline = self._info[job.job_id].deadline_s
        return priorities_model.priorities(dag, times.now, deadline, remaining, waited, p.gamma, p.omega)

    def _list_plan(self, cluster: ClusterState) -> None:
        """List-schedule the pending tasks at once (milliseconds: a job's arrival)."""
        tasks, keyed, hosts = self._plan_inputs(cluster)
        self._adopt(plan(tasks, hosts, cluster.now, 0.0, self.params.buckets), keyed)

    def _request_milp_plan(self, cluster: ClusterState) -> None:
        """A unit period's MILP plan, solved off the decision path (`plan_solver`); decisions go on with the
        plan in force until it is taken."""
        tasks, self._requested, hosts = self._plan_inputs(cluster)
        solve = partial(plan, tasks, hosts, cluster.now, self.params.milp_time_limit_s, self.params.buckets)
        self.plan_solver.submit(cluster.now, solve)
        self._arrived_since_request = False

    def _take_milp_plan(self, now: float) -> None:
        solved = self.plan_solver.take(now)
        if solved is None:
            return
        schedule, keyed = solved.value, self._requested
        self._adopt(schedule, keyed)
        milp = schedule.milp_objective
        self._periods.append(
            {
                "time_s": round(solved.requested_s, 3),
                "tasks": len(keyed),
                "solver": schedule.solver,
                "objective_s": round(schedule.objective, 3),
                "list_objective_s": round(schedule.list_objective, 3),
                "milp_objective_s": "" if milp is None else round(milp, 3),
                "wall_s": round(solved.wall_s, 3),
                "taken_s": round(now, 3),
            }
        )
        if self._arrived_since_request:  # the plan was made without them: list-schedule them in
            self._replan = True

    def _adopt(self, schedule: Schedule, keyed: dict[str, Task]) -> None:
        """Make a schedule the plan in force: per host, its tasks by planned start."""
        self._order = sorted(keyed.values(), key=lambda t: (schedule.starts[t.task_id][1], t.task_id))
        self._queues = {}
        for task in self._order:
            self._queues.setdefault(schedule.starts[task.task_id][0], []).append(task)

    def _planned_pending(self) -> int:
        return sum(1 for t in self._order if t.state is TaskState.PENDING)

    def plan_rows(self) -> list[dict]:
        return self._periods

    @staticmethod
    def _expected_end(task: Task, now: float) -> float:
        return now + DspPolicy._remaining_s(task, now)

    @staticmethod
    def _remaining_s(task: Task, now: float) -> float:
        """Time the task still needs at its allotted rates (its run so far subtracted: the time since this
        attempt started, less the time it spent suspended)."""
        total = expected_duration_s(task)
        if task.state is TaskState.RUNNING:
            return max(total - (now - task.started_s - task.paused_s), MIN_LEFT_S)
        if task.state is TaskState.SUSPENDED:
            return max(total - (task.suspended_s - task.started_s - task.paused_s), MIN_LEFT_S)
        return total

    # dispatch -------------------------------------------------------------------------------------
    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        if host.free_slots <= 0:
            return None
        promised = self._promised.get(host.name)
        while promised:
            task = promised[0]
            job = cluster.jobs.get(task.job_id)
            if task.state is not TaskState.PENDING or not cluster.stage_released(job, task.stage):
                promised.pop(0)  # started elsewhere, or a parent it was to wait for was killed
                continue
            if not host.can_run(task):
                return None  # its victims' cores are on their way back
            promised.pop(0)
            return self._starting(task, cluster.now)
        for queue in (self._queues.get(host.name, []), self._order):  # its own queue, then any host's
            for task in queue:
                if task.state is TaskState.PENDING and self._may_start(task, cluster) and host.can_run(task):
                    return self._starting(task, cluster.now)
        return None

    def _may_start(self, task: Task, cluster: ClusterState) -> bool:
        job = cluster.jobs.get(task.job_id)
        return job is not None and cluster.dependencies_met(job, task.stage)

    def _starting(self, task: Task, now: float) -> Task:
        self._quiet_until[task.task_id] = now + self.params.epoch_s
        return task

    # preemption -----------------------------------------------------------------------------------
    def preempt(self, cluster: ClusterState) -> list[Preemption]:
        now = cluster.now
        self._take_milp_plan(now)
        if now >= self._next_period and cluster.jobs and not self.plan_solver.busy:
            self._request_milp_plan(cluster)
            self._next_period = now + self.params.period_s
        if self._replan or (self._beyond_plan and self._planned_pending() < self.params.plan_tasks // 2):
            self._list_plan(cluster)
            self._replan = False
        self._held = {k: t for k, t in self._held.items() if t.state is TaskState.SUSPENDED}
        epoch = now >= self._next_epoch
        if not self._held and not epoch:
            return []  # nothing to resume, and no epoch yet: every round of a large cluster asks
        actions: list[Preemption] = []
        self._acted = set()
        budgets = {
            h.name: Budget(h.free.cores, h.free.memory_mb, h.free_slots) for h in cluster.hosts.values() if h.alive
        }
        for name in sorted({t.host for t in self._held.values()}):
            if name in budgets:
                actions += self._resume(cluster.hosts[name], cluster, budgets[name])
        if epoch:
            self._next_epoch = now + self.params.epoch_s
            priorities = _Priorities(self, cluster)
            room: dict[tuple[float, float], bool] = {}
            for host in cluster.hosts.values():
                if host.alive and not self._promised.get(host.name):
                    actions += self._preempt_on(host, cluster, budgets, room, priorities)
        self._held.update((a.task.task_id, a.task) for a in actions if a.action == "suspend")
        return actions

    def _resume(self, host: HostState, cluster: ClusterState, budget: Budget) -> list[Preemption]:
        """Suspended tasks go on, oldest suspension first, when the host has their cores and nothing promised;
        one that a task started early on this host waits for takes that task's cores."""
        suspended = sorted(
            (t for t in host.running.values() if t.state is TaskState.SUSPENDED), key=lambda t: t.suspended_s
        )
        if not suspended or self._promised.get(host.name):
            return []
        actions = []
        for task in suspended:
            cores = task.demand.cores
            if budget.cores < cores - 1e-9:
                stages = cluster.jobs[task.job_id].stages
                waiting = [
                    r
                    for r in host.running.values()
                    if r.state is TaskState.RUNNING
                    and r.task_id not in self._acted
                    and r.job_id == task.job_id
                    and task.stage in stages[r.stage].parents
                ]
                for dependent in waiting:
                    self._acted.add(dependent.task_id)
                    actions.append(Preemption(dependent, "suspend"))
                    budget.cores += dependent.allocation.cores
                    if budget.cores >= cores - 1e-9:
                        break
            if budget.cores >= cores - 1e-9:
                budget.cores -= cores
                actions.append(Preemption(task, "resume"))
                self._quiet_until[task.task_id] = cluster.now + self.params.epoch_s
        return actions

    def _waiting(self, host: HostState, cluster: ClusterState) -> list[Task]:
        """The host's queued tasks that could start but for its resources."""
        return [
            t
            for t in self._queues.get(host.name, [])
            if t.state is TaskState.PENDING
            and t.job_id in cluster.jobs
            and self._may_preempt_for(cluster.jobs[t.job_id], t.stage, cluster)
        ]

    def _may_preempt_for(self, job: Job, stage: int, cluster: ClusterState) -> bool:
        """Whether a waiting task of this stage may take a running task's place: DSP's, once its parents are done."""
        return cluster.dependencies_met(job, stage)

    def _preempt_on(
        self,
        host: HostState,
        cluster: ClusterState,
        budgets: dict[str, Budget],
        room: dict[tuple[float, float], bool],
        priorities: _Priorities,
    ) -> list[Preemption]:
        """Alg. 1 on one host, for the waiting tasks of its queue that no host has room for now (where some
        host has, dispatch starts them there). `room`: whether some budget admits a demand of these cores
        and memory, worked out once per demand until a budget changes (a scan of every host per waiting task
        and host made an epoch quadratic in the hosts)."""

        def room_somewhere(task: Task) -> bool:
            shape = (task.demand.cores, task.demand.memory_mb)
            if shape not in room:
                room[shape] = any(b.admits(task) for b in budgets.values())
            return room[shape]

        budget = budgets[host.name]
        waiting = [t for t in self._waiting(host, cluster) if not room_somewhere(t)]
        if not waiting:
            return []
        running = [
            t
            for t in host.running.values()
            if t.state is TaskState.RUNNING
            and t.task_id not in self._acted
            and cluster.now >= self._quiet_until.get(t.task_id, 0.0)
            and self._preemptable(t, priorities)
        ]
        victims = sorted(running, key=lambda t: (priorities.of(t), t.task_id))
        actions: list[Preemption] = []
        for task, victim in self._choose(waiting, victims, priorities):
            if not budget.admits(task, victim.allocation.cores):
                continue
            budget.take(task, victim.allocation.cores)
            room.clear()
            victims.remove(victim)
            actions.append(Preemption(victim, self.action))
            self._promised.setdefault(host.name, []).append(task)
        return actions

    def _preemptable(self, task: Task, priorities: _Priorities) -> bool:
        """Alg. 1: a running task that can wait longer than an epoch."""
        return priorities.allowable_s(task) > self.params.epoch_s

    def _depends(self, task: Task, on: Task, cluster: ClusterState) -> bool:
        """Condition C2: `task` is a descendant of `on` (same job, `on`'s stage an ancestor of its stage)."""
        return task.job_id == on.job_id and on.stage in self._info[task.job_id].ancestors[task.stage]

    def _choose(self, waiting: list[Task], victims: list[Task], priorities: _Priorities):
        """Alg. 1's pairs (waiting task, victim), in the order they preempt."""
        cluster = priorities.cluster
        taken: set[str] = set()

        def first_victim(task: Task) -> Task | None:
            return next((v for v in victims if v.task_id not in taken and not self._depends(task, v, cluster)), None)

        chosen = set()
        for task in waiting:  # urgent, or waited too long
            if priorities.allowable_s(task) <= self.epsilon_s or priorities.waited_s(task) >= self.tau_s:
                victim = first_victim(task)
                if victim is not None:
                    taken.add(victim.task_id)
                    chosen.add(task.task_id)
                    yield task, victim
        gap = priorities.mean_gap()
        for task in waiting[: math.ceil(self.params.delta * len(waiting))]:
            if task.task_id in chosen:
                continue
            victim = first_victim(task)
            if victim is None:
                continue
            difference = priorities.of(task) - priorities.of(victim)
            if difference > 0 and self._significant(difference, gap):
                taken.add(victim.task_id)
                yield task, victim

    def _significant(self, difference: float, gap: float) -> bool:
        """The normalised rule: the priority difference is over ρ times the mean neighbouring gap."""
        return difference > self.params.rho * gap


class DspNoNormalisedRulePolicy(DspPolicy):
    name = "dsp-nopp"
    summary = "DSP without the normalised-priority rule (DSPW/oPP)"

    def _significant(self, difference: float, gap: float) -> bool:
        return True


class _BaselinePreemption(DspPolicy):
    """DSP's plan and dispatch with another preemption rule: each waiting task of a host short of cores (its
    queue's, dependencies not looked at) preempts the lowest-ranked running task it outranks."""

    def _may_preempt_for(self, job: Job, stage: int, cluster: ClusterState) -> bool:
        return cluster.stage_released(job, stage)  # once its parents have started: it may then wait for them

    def _preemptable(self, task: Task, priorities: _Priorities) -> bool:
        return True

    def _depends(self, task: Task, on: Task, cluster: ClusterState) -> bool:
        return False

    def rank(self, task: Task, priorities: _Priorities) -> tuple:
        """Higher goes first; a waiting task preempts a running one it outranks."""
        raise NotImplementedError

    def _choose(self, waiting: list[Task], victims: list[Task], priorities: _Priorities):
        victims = sorted(victims, key=lambda t: self.rank(t, priorities))
        for task in waiting:
            mine = self.rank(task, priorities)
            victim = next((v for v in victims if self.rank(v, priorities) < mine), None)
            if victim is not None:
                victims.remove(victim)
                yield task, victim


class AmoebaPolicy(_BaselinePreemption):
    name = "amoeba"
    summary = "DSP's plan; Amoeba preemption: longest remaining time lowest, suspend"

    def rank(self, task: Task, priorities: _Priorities) -> tuple:
        return (-priorities.remaining_s(task), -task.demand.cores)


class NatjamPolicy(_BaselinePreemption):
    name = "natjam"
    summary = "DSP's plan; Natjam preemption: production jobs suspend research jobs' tasks"

    def rank(self, task: Task, priorities: _Priorities) -> tuple:
        """Among research tasks, the one with most cores, then the latest deadline, then the least remaining
        time is evicted first."""
        return (-task.demand.cores, -self._info[task.job_id].deadline_s, priorities.remaining_s(task))

    def _choose(self, waiting: list[Task], victims: list[Task], priorities: _Priorities):
        research = sorted(
            (v for v in victims if not self._info[v.job_id].production), key=lambda t: self.rank(t, priorities)
        )
        for task in waiting:
            if self._info[task.job_id].production and research:
                yield task, research.pop(0)


class SrptPolicy(_BaselinePreemption):
    name = "srpt"
    summary = "DSP's plan; SRPT preemption (alpha waited - beta remaining), kill and restart from scratch"
    action = "kill"

    Params = SrptParams
    params: SrptParams

    def rank(self, task: Task, priorities: _Priorities) -> tuple:
        return (self.params.alpha * priorities.waited_s(task) - self.params.beta * priorities.remaining_s(task),)


class _Priorities:
    """Eqs. 12-13 and the times they rest on, for the tasks of one epoch's decisions (each job's worked out
    once, over its unfinished tasks)."""

    def __init__(self, policy: DspPolicy, cluster: ClusterState):
        self.policy, self.cluster, self.now = policy, cluster, cluster.now
        self._priority: dict[str, float] = {}
        self._allowable: dict[str, float] = {}
        self._jobs: set[str] = set()
        self._gap: float | None = None

    def remaining_s(self, task: Task) -> float:
        return self.policy._remaining_s(task, self.now)

    def waited_s(self, task: Task) -> float:
        """How long it has been ready and not running (pending once its stage could start, or suspended)."""
        if task.state is TaskState.SUSPENDED:
            return self.now - task.suspended_s
        if task.state is TaskState.PENDING:
            ready = self.cluster.jobs[task.job_id].stage_ready_s[task.stage]
            return 0.0 if ready is None else max(0.0, self.now - max(ready, task.queued_s))
        return 0.0

    def of(self, task: Task) -> float:
        self._job(task.job_id)
        return self._priority[task.task_id]

    def allowable_s(self, task: Task) -> float:
        self._job(task.job_id)
        return self._allowable[task.task_id]

    def mean_gap(self) -> float:
        """P̄: the mean difference between neighbouring priorities, over every active job's unfinished tasks."""
        if self._gap is None:
            for job_id in self.cluster.jobs:
                self._job(job_id)
            values = sorted(self._priority.values())
            self._gap = (values[-1] - values[0]) / (len(values) - 1) if len(values) > 1 else 0.0
        return self._gap

    def _job(self, job_id: str) -> None:
        if job_id in self._jobs:
            return
        self._jobs.add(job_id)
        job = self.cluster.jobs[job_id]
        unfinished = {t.task_id: t for t in job.tasks if t.state is not TaskState.DONE}
        dag = nx.DiGraph()
        for task in unfinished.values():
            dag.add_node(task.task_id, duration=expected_duration_s(task), stage=task.stage)
        for task in unfinished.values():
            for parent in job.stages[task.stage].parents:
                dag.add_edges_from(
                    (s.task_id, task.task_id) for s in job.stages[parent].tasks if s.task_id in unfinished
                )
        remaining = {k: self.remaining_s(t) for k, t in unfinished.items()}
        waited = {k: self.waited_s(t) for k, t in unfinished.items()}
        deadline = self.policy._info[job_id].deadline_s
        self._priority.update(
            priorities_model.priorities(
                dag, self.now, deadline, remaining, waited, self.policy.params.gamma, self.policy.params.omega
            )
        )
        self._allowable.update(priorities_model.allowable_waits(dag, self.now, deadline, remaining))
