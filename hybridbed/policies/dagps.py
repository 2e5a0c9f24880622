"""DAGPS / Graphene (Grandl et al., OSDI'16, "Do the Hard Stuff First"): a preferred schedule per DAG,
softly enforced online while packing, preferring short jobs and bounding unfairness.

Offline, when a job arrives (`job_arrived`), BuildSchedule (`planning/dagps.py`) places its tasks in a
resource-time space of the machines available to the job (Fig. 9: "C, the capacity available for this
job"): its share of the live hosts at arrival, the hosts over the jobs not yet finished (`space: share`),
or every host (`space: cluster`), or `space_hosts` when set; never more machines than tasks. Each task
lasts its duration at its allotted rates (`transfers.expected_duration_s`) and demands shares of one
host. priScore ranks the tasks by planned start (§5). Jobs alike (same stages and sizes, as recurring
jobs or one query template at one size) on as many machines reuse one schedule. Schedules are built off
the decision path, one at a time, by the plan solver (scheduler/plan_solver.py: a worker process in the
emulated scheduler; in the simulator usable from the request's time plus the build's wall time), as the
paper builds them "at job submission time or soon thereafter"; until its schedule is taken, a job's tasks
are matched without preference (priScore 1). The lower bounds CPLen, TWork, ModCP and NewLB of every job
go to the run's plan.csv beside the planned length, when the schedule was asked for and used from, and
its build's wall time.

Online (Fig. 8), for a host with room, every runnable stage of every job offers a task (a stage's tasks
are alike: the best located one starts if the stage is chosen):

    perfScore = priScore · {pScore, oScore} − η · srpt_job

- pScore, for a task that fits the host's free resources in every modelled dimension: the dot product
  of the host's free resources and the task's demand, both normalised by the host's capacity (as
  Tetris), times rp = 1 − remote_penalty (0.8, as the paper uses) when a root task would read its block
  from another host (the locality-sensitive case);
- oScore (`overbooking`), for a task that fits the host's free cores and memory but not its free disk or
  network bandwidth (the fungible resources, which the paper's DAGPS allocates past 100 %, §8.2). The
  paper omits the formula and states the rule: overbook when the cost, every task using the resource
  slowing down, is less than the benefit, more tasks finishing. hybridbed counts tasks progressing on
  the overbooked resources: n tasks use them at 1/max(1, load/capacity) of their rate before, n + 1 at
  capacity/(load + demand) after (the worst overbooked dimension); oScore is the gain, when positive
  (none otherwise). Lexicographic, as §5 says: any task with a pScore beats every oScore-only task;
- priScore (§5): 1 − rank/N for the task planned to start rank-th of the DAG's N (`pri_score:
  absolute`, the paper's), or that divided by the priScore of the job's next task in its schedule among
  the runnable ones (`relative`, hybridbed's variant: with the absolute ranks a newly arrived job's
  first tasks, near 1, beat a running job's later ones, near 0). The k-th task of a stage to start takes
  the k-th best priScore of the stage's tasks in the schedule: BuildSchedule orders alike tasks only by
  how many of them have started, and which one is best located here says nothing of the schedule;
- srpt: the job's remaining work (Σ over its pending tasks of duration × normalised demand);
- η = m · mean(priScore · score) / mean(srpt) over the decision's candidates of the winning tier (pScore
  or oScore), m = 0.2 (§8.5).

A remote read also needs its disk-read and network-out allotment free at its block's host (Tetris
§3.2, on which DAGPS's matcher builds); as Tetris does, that is checked for the chosen candidate, and
the next best starts when it has none.

Fairness: one deficit counter per job group (the jobs' `queue`). After each choice every group with
work gains f(demand) · (its fair share − 1 if the task is its own else 0), f the task's dominant share
of the cluster (DRF) or one slot's share (slots); when the most deprived group's deficit reaches κ (a
share of the cluster), the choice is made among its tasks only. A group with nothing to run is reset
to zero (deficit round robin), so it cannot bank credit while idle. The paper gives no κ; 0.1 here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from typing import Literal

import networkx as nx
from pydantic import Field

from hybridbed.policies.planning.dagps import DEFAULT_STEP, build_schedule, lower_bounds
from hybridbed.policies.tetris import PackingScores, RemainingWork, best_first, normalised
from hybridbed.scheduler.cluster import ClusterState, HostState, StageOffer
from hybridbed.scheduler.model import Job, Resources, StageSpec, Task
from hybridbed.scheduler.policy import Policy, PolicyParams
from hybridbed.scheduler.transfers import expected_duration_s

FUNGIBLE = (2, 3, 4, 5)  # Resources.vector()'s disk read/write and network in/out: what oScore may overbook
StagePriorities = dict[int, list[float]]  # per stage, its tasks' priScores, highest first


@dataclass(slots=True)
class Candidate:
    """A job's offer for the host: one of its stages (a stage's tasks are alike; the best located one is
    picked once the stage is chosen)."""

    job: Job
    stage: int
    score: float  # priScore · pScore, or priScore · oScore for an overbooking candidate
    srpt: float
    overbooks: bool


def stage_priorities(pri_scores: dict[tuple[int, int], float]) -> StagePriorities:
    """The schedule's priScores per stage, highest first: the k-th task of a stage to start takes the
    stage's k-th (a stage's tasks are alike, so the schedule orders how many of them start, not which)."""
    by_stage: dict[int, list[float]] = defaultdict(list)
    for (stage, _), score in pri_scores.items():
        by_stage[stage].append(score)
    return {stage: sorted(scores, reverse=True) for stage, scores in by_stage.items()}


def next_priority(priorities: StagePriorities | None, offer: StageOffer) -> float:
    """priScore of the stage's next task to start (1 while the job's schedule is not built)."""
    return 1.0 if priorities is None else priorities[offer.stage][offer.tasks - offer.pending]


def overbooking_gain(demand: Resources, host: HostState) -> float:
    """oScore: how many more tasks progress on the host's overbooked disk and network if the task starts
    there (0 when fewer would, or when it needs no overbooking); see the module docstring."""
    capacity, used = host.capacity.vector(), host.used.vector()
    need = demand.vector()
    over = [i for i in FUNGIBLE if capacity[i] > 0 and need[i] > 0 and used[i] + need[i] > capacity[i] + 1e-9]
    if not over:
        return 0.0
    loads = [*(t.allocation or t.demand for t in host.running.values()), *host.serving.values()]
    users = sum(1 for load in loads if any(load.vector()[i] > 0 for i in over))
    before = max(1.0, *(used[i] / capacity[i] for i in over))
    after = max((used[i] + need[i]) / capacity[i] for i in over)
    return max(0.0, (users + 1) / after - users / before)


ScheduleKey = tuple[tuple[StageSpec, ...], int]  # a DAG's shape and the machines of its space


@dataclass(frozen=True)
class Planned:
    """A built schedule: its priScores per stage, its plan.csv fields, the job it was built for, and when it
    was asked for."""

    priorities: StagePriorities
    row: dict
    planned_for: str
    requested_s: float


def plan_dag(dag: nx.DiGraph, machines: int, step: float) -> tuple[dict, dict]:
    """BuildSchedule and the lower bounds for one DAG: its priScores per stage and plan.csv fields (run by
    the plan solver, off the decision path)."""
    schedule = build_schedule(dag, machines, step)
    bounds = lower_bounds(dag, machines)
    row = {
        "machines": machines,
        "planned_s": schedule.makespan,
        "cp_len_s": bounds.cp_len,
        "t_work_s": bounds.t_work,
        "mod_cp_s": bounds.mod_cp,
        "new_lb_s": bounds.new_lb,
    }
    return stage_priorities(schedule.pri_scores()), {k: round(v, 3) for k, v in row.items()}


def job_dag(job: Job, capacity: Resources) -> nx.DiGraph:
    """The job's tasks as DAGPS's DAG: nodes (stage, index) with duration and demand as shares of one host
    (capped at a whole host), an edge from every task of a parent stage to every task of its child."""
    dag = nx.DiGraph()
    for i, stage in enumerate(job.stages):
        for task in stage.tasks:
            demand = tuple(min(1.0, d) for d in normalised(task.demand, capacity))
            dag.add_node((i, task.index), duration=expected_duration_s(task), demand=demand, stage=i)
        for p in stage.parents:
            dag.add_edges_from(((p, a.index), (i, b.index)) for a in job.stages[p].tasks for b in stage.tasks)
    return dag


class DagpsParams(PolicyParams):
    srpt_weight: float = Field(
        default=0.2, ge=0, description="m in eta = m mean(priScore pScore)/mean(srpt) (§8.5: 0.2)"
    )
    remote_penalty: float = Field(
        default=0.2, ge=0, lt=1, description="1 - rp for a root task reading remotely (the paper's rp = 0.8)"
    )
    unfairness: float = Field(
        default=0.1,
        gt=0,
        description="kappa, the deficit that restricts a choice to the most "
        "deprived group (the paper gives none; hybridbed's 0.1)",
    )
    fairness: Literal["drf", "slots"] = Field(default="drf", description="how a task's share of the cluster is counted")
    step: float = Field(
        default=DEFAULT_STEP,
        gt=0,
        le=1,
        description="the (l, f) grid's step of BuildSchedule's candidate troublesome sets (planning.dagps)",
    )
    pri_score: Literal["absolute", "relative"] = Field(
        default="absolute",
        description="priScore as §5 defines it (1 - rank/N), or relative to the job's next task in its schedule",
    )
    overbooking: bool = Field(
        default=True,
        description="oScore (§5): a task that fits the free cores and memory may overbook disk and network "
        "when more tasks progress than before (the paper omits the formula; see policies.dagps)",
    )
    space: Literal["share", "cluster"] = Field(
        default="share",
        description="machines of the resource-time space: the job's share of the live hosts at arrival "
        "(hosts / jobs not finished; Fig. 9's capacity available to the job) or every live host",
    )
    space_hosts: int | None = Field(
        default=None, ge=1, description="machines of the resource-time space, fixed (overrides `space`)"
    )


class DagpsPolicy(Policy):
    name = "dagps"
    summary = "DAGPS/Graphene: per-DAG preferred schedule (troublesome tasks first), packing x priScore - srpt, deficit fairness"
    default_slowstart = 1.0

    Params = DagpsParams
    params: DagpsParams

    def __init__(self, **params: object):
        super().__init__(**params)
        self._planned: dict[ScheduleKey, Planned] = {}
        self._waiting: dict[ScheduleKey, tuple[nx.DiGraph, list[str]]] = {}  # to plan: its DAG, jobs waiting
        self._planning: ScheduleKey | None = None  # the schedule the plan solver is building
        self._pri: dict[str, StagePriorities] = {}  # job -> its schedule's priScores per stage
        self._rows: list[dict] = []
        self._deficit: dict[str, float] = {}
        self._work = RemainingWork()

    # offline: a preferred schedule per DAG ------------------------------------------------------------
    def job_arrived(self, job: Job, cluster: ClusterState) -> None:
        for done in [j for j in self._pri if j in cluster.finished]:
            del self._pri[done]
        machines = min(self._space_machines(cluster), len(job.maps) + len(job.reduces))
        key = (job.spec.stage_specs(), machines)
        if key in self._planned:
            self._use(key, job.job_id, cluster.now)
        elif key in self._waiting:
            self._waiting[key][1].append(job.job_id)
        else:
            self._waiting[key] = (job_dag(job, next(iter(cluster.hosts.values())).capacity), [job.job_id])
        self._plan_next(cluster)

    def _plan_next(self, cluster: ClusterState) -> None:
        """Take a schedule the plan solver has finished, hand it to the jobs waiting for it, and start the next."""
        solved = self.plan_solver.take(cluster.now) if self._planning is not None else None
        if solved is not None:
            key, self._planning = self._planning, None
            _, jobs = self._waiting.pop(key)
            priorities, row = solved.value
            self._planned[key] = Planned(
                priorities, {**row, "build_wall_s": round(solved.wall_s, 3)}, jobs[0], solved.requested_s
            )
            for job_id in jobs:
                if job_id in cluster.jobs:
                    self._use(key, job_id, cluster.now)
        if self._planning is None and self._waiting:
            self._planning = next(iter(self._waiting))
            dag, _ = self._waiting[self._planning]
            self.plan_solver.submit(cluster.now, partial(plan_dag, dag, self._planning[1], self.params.step))

    def _use(self, key: ScheduleKey, job_id: str, now: float) -> None:
        planned = self._planned[key]
        self._pri[job_id] = planned.priorities
        self._rows.append(
            {
                "job_id": job_id,
                **planned.row,
                "schedule_of": planned.planned_for,
                "requested_s": round(planned.requested_s, 3),
                "used_from_s": round(now, 3),
            }
        )

    def _space_machines(self, cluster: ClusterState) -> int:
        """Machines of the job's resource-time space (Fig. 9's capacity available to the job)."""
        if self.params.space_hosts is not None:
            return self.params.space_hosts
        live = sum(1 for h in cluster.hosts.values() if h.alive) or len(cluster.hosts)
        if self.params.space == "cluster":
            return live
        return max(1, live // max(1, len(cluster.jobs)))

    def plan_rows(self) -> list[dict]:
        return self._rows

    # online: the matcher ----------------------------------------------------------------------------
    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        if self._planning is not None:
            self._plan_next(cluster)
        if host.free_slots <= 0:
            return None
        candidates = self._candidates(host, cluster)
        if not candidates:
            return None
        groups = {c.job.spec.queue for c in candidates} | {j.spec.queue for j in cluster.launchable.values()}
        for group in list(self._deficit):
            if group not in groups:
                del self._deficit[group]  # nothing to run: no credit kept
        pool = candidates
        if self._deficit:
            deprived = max(sorted(self._deficit), key=self._deficit.__getitem__)
            own = [c for c in candidates if c.job.spec.queue == deprived]
            if self._deficit[deprived] >= self.params.unfairness and own:
                pool = own
        fitting = [c for c in pool if not c.overbooks]
        pool = fitting or pool  # lexicographic: a task that fits beats every overbooking one
        mean_score = sum(c.score for c in pool) / len(pool)
        mean_srpt = sum(c.srpt for c in pool) / len(pool)
        eta = self.params.srpt_weight * mean_score / mean_srpt if mean_srpt > 0 else 0.0
        for best in best_first(pool, lambda c: (c.score - eta * c.srpt, -c.job.spec.arrival_s)):
            task, remote = cluster.best_in_stage(best.job, best.stage, host)
            if not remote or cluster.source_has_room(task, host):
                self._charge(task, best.job.spec.queue, groups, cluster)
                return task
        return None

    def _candidates(self, host: HostState, cluster: ClusterState) -> list[Candidate]:
        """Each launchable job's offer of every runnable stage that fits the host (or may overbook it), scored
        by the priScore of the stage's next task and the packing score of its demand as placed here. A remote
        read's source is checked for room only for the candidate chosen (as Tetris does)."""
        scores = PackingScores(host.free, host.capacity)
        gains: dict[Resources, float] = {}  # oScore per demand: it depends on the demand and the host alone
        overbooking, relative = self.params.overbooking, self.params.pri_score == "relative"
        kept_remote = 1 - self.params.remote_penalty
        found = []
        for job in cluster.launchable.values():
            offers = cluster.stage_offers(job)
            priorities = self._pri.get(job.job_id)
            # relative: over the job's next task in its schedule among those it may start
            first = max(next_priority(priorities, o) for o in offers) if relative and offers else 1.0
            srpt = None
            for offer in offers:
                demand, remote = offer.placed(host.name)
                fit = scores.of(demand)
                if fit is not None:
                    score = fit * kept_remote if remote else fit
                elif overbooking and demand.allocatable_in(host.free):
                    score = gains.get(demand, -1.0)
                    if score < 0:
                        score = gains[demand] = overbooking_gain(demand, host)
                    if score <= 0:
                        continue
                else:
                    continue
                if srpt is None:
                    srpt = self._work.of(job.job_id, cluster.pending[job.job_id], host.capacity)
                found.append(
                    Candidate(job, offer.stage, next_priority(priorities, offer) / first * score, srpt, fit is None)
                )
        return found

    def _charge(self, task: Task, chosen: str, groups: set[str], cluster: ClusterState) -> None:
        """Deficit counters: every group with work is owed its share of what was handed out (`task`, to the
        group `chosen`)."""
        if len(groups) < 2:
            self._deficit.clear()
            return
        if self.params.fairness == "drf":
            amount = cluster.dominant_fraction(task.demand)
        else:
            amount = 1 / sum(h.slots for h in cluster.hosts.values() if h.alive)
        share = 1 / len(groups)
        for group in groups:
            self._deficit[group] = self._deficit.get(group, 0.0) + amount * (share - (group == chosen))
