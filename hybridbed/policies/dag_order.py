"""The DAGPS paper's baselines (§8.1): Tez's task orders on YARN's Capacity Scheduler.

Jobs are served in arrival order (one Capacity Scheduler queue orders its applications first in, first
out); within a job the runnable stages go in the baseline's order, and the first task that fits the
host's free cores and memory starts ("fit cpu/mem": disk and network are not looked at). Work-conserving:
a job whose next tasks do not fit lets the next job's through.

- `bfs` (Tez's default): breadth-first, the stage fewest levels below the roots first;
- `cp` (Tez + critical path): the stage with the longest path of task durations from it to the DAG's end
  first (durations at the allotted rates, `transfers.expected_duration_s`);
- `random`: jobs and stages in random order (from the policy's seed).
A root stage's task is the best located one for the host (node, then rack, then any).
"""

from __future__ import annotations

import random

from pydantic import Field

from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.dag_paths import stage_critical_paths, stage_levels
from hybridbed.scheduler.model import Job, Task
from hybridbed.scheduler.policy import Policy, PolicyParams


class StageOrderPolicy(Policy):
    """Jobs first in, first out; each job's runnable stages by `ranks` (lowest first)."""

    default_slowstart = 1.0

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self._ranks: dict[str, list[float]] = {}

    def ranks(self, job: Job) -> list[float]:
        raise NotImplementedError

    def job_arrived(self, job: Job, cluster: ClusterState) -> None:
        for done in [j for j in self._ranks if j in cluster.finished]:
            del self._ranks[done]
        self._ranks[job.job_id] = self.ranks(job)

    def job_order(self, cluster: ClusterState) -> list[Job]:
        return sorted(cluster.launchable.values(), key=lambda j: (j.spec.arrival_s, j.job_id))

    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        if host.free_slots <= 0:
            return None
        free = host.free
        for job in self.job_order(cluster):
            ranks = self._ranks[job.job_id]
            for stage in sorted(cluster.runnable_stages(job), key=lambda s: (ranks[s], s)):
                if job.stages[stage].tasks[0].demand.allocatable_in(free):  # a stage's tasks share their demand
                    return cluster.best_in_stage(job, stage, host)[0]
        return None


class BfsPolicy(StageOrderPolicy):
    name = "bfs"
    summary = "Tez default on the Capacity Scheduler: jobs FIFO, stages breadth-first, fit cpu/mem"

    def ranks(self, job: Job) -> list[float]:
        return [float(level) for level in stage_levels(job)]


class CriticalPathPolicy(StageOrderPolicy):
    name = "cp"
    summary = "Tez + critical path: jobs FIFO, stages by longest remaining path, fit cpu/mem"

    def ranks(self, job: Job) -> list[float]:
        return [-path for path in stage_critical_paths(job)]


class RandomParams(PolicyParams):
    seed: int = Field(default=1, description="the random order's own stream")


class RandomPolicy(StageOrderPolicy):
    name = "random"
    summary = "random job and stage order, fit cpu/mem"

    Params = RandomParams
    params: RandomParams

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self.rng = random.Random(self.params.seed)

    def ranks(self, job: Job) -> list[float]:
        return [self.rng.random() for _ in job.stages]

    def job_order(self, cluster: ClusterState) -> list[Job]:
        jobs = sorted(cluster.launchable.values(), key=lambda j: j.job_id)
        self.rng.shuffle(jobs)
        return jobs
