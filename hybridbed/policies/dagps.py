"""DAGPS / Graphene (Grandl et al., OSDI'16, "Do the Hard Stuff First"): a preferred schedule per DAG,
softly enforced online while packing, preferring short jobs and bounding unfairness.

Offline, when a job arrives (`job_arrived`), BuildSchedule (`planning/dagps.py`) places its tasks in a
resource-time space of min(space_hosts, tasks) empty machines (space_hosts: the cluster's hosts unless
set; more machines than tasks never help; the paper leaves the space's size open), with
each task's duration at its allotted rates (`transfers.expected_duration_s`) and its demand as shares of
one host; priScore ranks the tasks by planned start, 1 for the first down to 1/N. Jobs alike (same
stages and sizes, as recurring jobs or one query template at one size) reuse one schedule. The lower
bounds CPLen, TWork, ModCP and NewLB of every job go to the run's plan.csv beside the planned length.

Online (Fig. 8), for a host with room, every runnable stage of every job offers a task (the best
located one; a stage's tasks are alike) that fits the host's free resources in every modelled
dimension:

    perfScore = priScore · pScore − η · srpt_job

- pScore: the dot product of the host's free resources and the task's demand, both normalised by the
  host's capacity (as Tetris), times rp = 1 − remote_penalty (0.8, as the paper uses) when a root task
  would read its block from another host (the locality-sensitive case);
- srpt: the job's remaining work (Σ over its pending tasks of duration × normalised demand);
- priScore: relative to the job's best runnable task (its next task in the schedule scores 1). The paper's
  raw ranks (1 for a DAG's first task down to 1/N for its last) make a newly arrived job's first tasks
  beat every running job's later ones, which serves the newest job first (docs/policies.md);
- η = m · mean(priScore · pScore) / mean(srpt) over the decision's candidates, m = 0.2 (§8.5).
Overbooking (oScore) is left out, as the paper allows: a task that does not fit is not a candidate.

Fairness: one deficit counter per job group (the jobs' `queue`). After each choice every group with
work gains f(demand) · (its fair share − 1 if the task is its own else 0), f the task's dominant share
of the cluster (DRF) or one slot's share (slots); when the most deprived group's deficit reaches κ (a
share of the cluster), the choice is made among its tasks only. A group with nothing to run is reset
to zero (deficit round robin), so it cannot bank credit while idle. The paper gives no κ; 0.1 here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import networkx as nx
from pydantic import Field

from hybridbed.policies.planning.dagps import DEFAULT_STEP, build_schedule, lower_bounds
from hybridbed.policies.tetris import PackingScores, RemainingWork, normalised
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Job, Resources, StageSpec, Task
from hybridbed.scheduler.policy import Policy, PolicyParams
from hybridbed.scheduler.transfers import expected_duration_s


@dataclass
class Candidate:
    task: Task
    group: str
    packing: float  # priScore · pScore
    srpt: float


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
    space_hosts: int | None = Field(
        default=None,
        ge=1,
        description="machines of the resource-time space (default: the cluster's hosts; the paper leaves it open)",
    )


class DagpsPolicy(Policy):
    name = "dagps"
    summary = "DAGPS/Graphene: per-DAG preferred schedule (troublesome tasks first), packing x priScore - srpt, deficit fairness"
    default_slowstart = 1.0

    Params = DagpsParams
    params: DagpsParams

    def __init__(self, **params: object):
        super().__init__(**params)
        # per DAG shape and machine count: priScores, the planned length and lower bounds, the job planned for
        self._planned: dict[tuple[tuple[StageSpec, ...], int], tuple[dict[tuple[int, int], float], dict, str]] = {}
        self._pri: dict[str, dict[tuple[int, int], float]] = {}  # job -> (stage, index) -> priScore
        self._rows: list[dict] = []
        self._deficit: dict[str, float] = {}
        self._work = RemainingWork()

    # offline: a preferred schedule per DAG ------------------------------------------------------------
    def job_arrived(self, job: Job, cluster: ClusterState) -> None:
        for done in [j for j in self._pri if j in cluster.finished]:
            del self._pri[done]
        machines = min(self.params.space_hosts or len(cluster.hosts), len(job.maps) + len(job.reduces))
        key = (job.spec.stage_specs(), machines)
        if key not in self._planned:
            dag = job_dag(job, next(iter(cluster.hosts.values())).capacity)
            schedule = build_schedule(dag, machines, self.params.step)
            bounds = lower_bounds(dag, machines)
            row = {
                "machines": machines,
                "planned_s": schedule.makespan,
                "cp_len_s": bounds.cp_len,
                "t_work_s": bounds.t_work,
                "mod_cp_s": bounds.mod_cp,
                "new_lb_s": bounds.new_lb,
            }
            self._planned[key] = (schedule.pri_scores(), {k: round(v, 3) for k, v in row.items()}, job.job_id)
        pri_scores, row, planned_for = self._planned[key]
        self._pri[job.job_id] = pri_scores
        self._rows.append({"job_id": job.job_id, **row, "schedule_of": planned_for})

    def plan_rows(self) -> list[dict]:
        return self._rows

    # online: the matcher ----------------------------------------------------------------------------
    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        if host.free_slots <= 0:
            return None
        candidates = self._candidates(host, cluster)
        if not candidates:
            return None
        mean_packing = sum(c.packing for c in candidates) / len(candidates)
        mean_srpt = sum(c.srpt for c in candidates) / len(candidates)
        eta = self.params.srpt_weight * mean_packing / mean_srpt if mean_srpt > 0 else 0.0
        pool = candidates
        groups = {c.group for c in candidates} | {j.spec.queue for j in cluster.launchable.values()}
        for group in list(self._deficit):
            if group not in groups:
                del self._deficit[group]  # nothing to run: no credit kept
        if self._deficit:
            deprived = max(sorted(self._deficit), key=self._deficit.__getitem__)
            own = [c for c in candidates if c.group == deprived]
            if self._deficit[deprived] >= self.params.unfairness and own:
                pool = own
        best = max(pool, key=lambda c: (c.packing - eta * c.srpt, -cluster.jobs[c.task.job_id].spec.arrival_s))
        self._charge(best, groups, cluster)
        return best.task

    def _candidates(self, host: HostState, cluster: ClusterState) -> list[Candidate]:
        scores = PackingScores(host.free, host.capacity)
        found = []
        for job in cluster.launchable.values():
            runnable = cluster.runnable_stages(job)
            fitting = [s for s in runnable if scores.of(cluster.placed_stage_demand(job, s, host)) is not None]
            if not fitting:
                continue
            pri, waiting = self._pri[job.job_id], cluster.pending[job.job_id].stages
            offers = [cluster.best_in_stage(job, s, host) for s in fitting]
            # the job's next task in its schedule: over the offers, and the first task of each stage that
            # does not fit here (not worth finding its best located task)
            first = max(
                [pri[(t.stage, t.index)] for t, _ in offers]
                + [pri[(s, waiting[s].first().index)] for s in runnable if s not in fitting]
            )
            srpt = self._work.of(job.job_id, cluster.pending[job.job_id], host.capacity)
            for task, remote in offers:
                if not cluster.source_has_room(task, host):
                    continue
                penalty = 1 - self.params.remote_penalty if remote else 1.0
                placed = scores.of(cluster.placed_task_demand(task, host.name))
                packing = pri[(task.stage, task.index)] / first * placed * penalty
                found.append(Candidate(task, job.spec.queue, packing, srpt))
        return found

    def _charge(self, chosen: Candidate, groups: set[str], cluster: ClusterState) -> None:
        """Deficit counters: every group with work is owed its share of what was handed out."""
        if len(groups) < 2:
            self._deficit.clear()
            return
        if self.params.fairness == "drf":
            amount = cluster.dominant_fraction(chosen.task.demand)
        else:
            amount = 1 / sum(h.slots for h in cluster.hosts.values() if h.alive)
        share = 1 / len(groups)
        for group in groups:
            self._deficit[group] = self._deficit.get(group, 0.0) + amount * (share - (group == chosen.group))
