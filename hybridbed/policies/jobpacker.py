"""JobPacker (§4): the offline plan of `planning.jobpacker`, run with shuffle aggregation and OCS hints.

- Shuffle aggregation (§4.2): a job's reducers are told about map outputs only once the reducers
  running together will fetch at least the elephant threshold (or every reducer of the job is
  running, for jobs that never reach it), so the shuffle moves in bulk over few rack pairs.
- Planned elephants: a job planned on the OCS has every (map rack, reduce rack) pair of its plan
  classified as an elephant from its first byte, since the plan sized each pair's share above the
  threshold; other aggregates are elephants once their announced bytes reach it, as for any policy.
- OCS demand hints: every hint interval, the bytes that running reducers of released jobs still have
  to fetch from finished or running maps on other racks, summed per rack pair. A pair whose whole
  aggregated shuffle (fetched or not) reaches the elephant threshold is an elephant until it is
  drained: it is hinted at no less than the threshold, so its circuit is not torn down halfway. The
  controller matches on the hints (with measured demand, per the scenario's `ocs.demand_source`).
- Ad-hoc jobs (§4.4) get containers the plan leaves free, in Fair's order, with the sparsity rule: a
  rack already running a task of a shuffle-heavy job takes a non-shuffle-heavy ad-hoc job; otherwise
  a shuffle-heavy ad-hoc job goes first. An ad-hoc job counts as shuffle-heavy when its input exceeds
  `adhoc_heavy_input_gb` (full-scale GB; the paper's 1 GB, from SWIM FB-2009/2010).
"""

from __future__ import annotations

import random

import numpy as np
from pydantic import Field

from hybridbed.policies.planned import PlannedParams, PlannedPolicy
from hybridbed.policies.planning.jobpacker import JobPackerPlanner
from hybridbed.policies.planning.latency import JobProfile, LatencyModel
from hybridbed.policies.planning.timeline import Plan
from hybridbed.policies.shuffle_demand import ShuffleDemand
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Job, Task, TaskState


class JobPackerParams(PlannedParams):
    sub_batches: int = Field(
        default=5,
        ge=1,
        description="B, the sub-batches a batch of recurring jobs is planned in (§4.3.2; the paper's default)",
    )
    overprovision: float = Field(
        default=0.0,
        ge=0,
        description="extra containers a job's zone may take beyond its plan, as a fraction (§4.3; 0: none)",
    )
    adhoc_heavy_input_gb: float = Field(
        default=1.0,
        ge=0,
        description="an ad-hoc job reading more (full-scale GB) is shuffle-heavy (§4.4: 1 GB, from SWIM FB-2009/2010)",
    )
    seed: int = Field(default=0, description="the planner's tie-breaking")


class JobPackerPolicy(PlannedPolicy):
    name = "jobpacker"
    summary = "JobPacker: rack-pair aggregation of shuffle-heavy recurring jobs onto the OCS, planned offline"
    default_slowstart = 0.7

    Params = JobPackerParams
    params: JobPackerParams

    def __init__(self, **params: object):
        super().__init__(**params)
        self.heavy: set[str] = set()  # shuffle-heavy planned jobs
        self._released: set[str] = set()
        self._shuffle = ShuffleDemand()

    def build_plan(self, jobs: list[JobProfile], model: LatencyModel) -> Plan:
        p = self.params
        planner = JobPackerPlanner(model, p.sub_batches, p.overprovision, rng=random.Random(p.seed))
        plan = planner.plan(jobs)
        self.heavy = set(planner.zones)  # the profiler's shuffle-heavy jobs
        return plan

    # shuffle aggregation --------------------------------------------------------------------------
    def release_shuffle(self, job: Job, cluster: ClusterState) -> bool:
        if job.job_id in self._released:
            return True
        running = [r for r in job.reduces if r.state is TaskState.RUNNING]
        aggregated = sum(r.fetch_bytes for r in running)
        if aggregated >= self.network.elephant_bytes or len(running) == len(job.reduces):
            self._released.add(job.job_id)
            return True
        return False

    def ocs_demand(self, cluster: ClusterState) -> list[list[float]] | None:
        released = [job for job_id, job in cluster.jobs.items() if job_id in self._released]
        aggregate, remaining = self._shuffle.rack_pairs(released, cluster.rack_of, cluster.racks)
        elephant = (remaining > 0) & (aggregate >= self.network.elephant_bytes)
        return np.where(elephant, np.maximum(remaining, self.network.elephant_bytes), remaining).tolist()

    def planned_elephant(self, job: Job, source_rack: int, consumer_rack: int) -> bool:
        """A pair of the job's planned map and reduce racks, for a job planned on the OCS: the profiler
        chose its widths so that every such pair's share of the shuffle is an elephant (§4.3.1), and its
        aggregated shuffle is steered onto circuits (§4.2) from the first byte."""
        planned = self.offline.jobs.get(job.job_id)
        return (
            planned is not None
            and planned.uses_ocs
            and planned.reduces is not None
            and source_rack in planned.maps.racks
            and consumer_rack in planned.reduces.racks
        )

    # ad-hoc jobs ----------------------------------------------------------------------------------
    def adhoc_task(self, host: HostState, cluster: ClusterState, jobs: list[Job]) -> Task | None:
        heavy_input = self.params.adhoc_heavy_input_gb * 1e9 * self.network.size_scale
        heavy: list[Job] = []
        light: list[Job] = []
        for job in jobs:
            (heavy if self._shuffle_heavy(job, heavy_input) else light).append(job)
        busy_with_heavy = any(
            self._shuffle_heavy(cluster.jobs[t.job_id], heavy_input)
            for name in cluster.rack_hosts[host.rack]
            for t in cluster.hosts[name].running.values()
            if t.job_id in cluster.jobs
        )
        first, second = (light, heavy) if busy_with_heavy else (heavy, light)
        return self.fair.pick(host, cluster, first) or self.fair.pick(host, cluster, second)

    def _shuffle_heavy(self, job: Job, heavy_input_bytes: float) -> bool:
        if job.job_id in self.offline.jobs:
            return job.job_id in self.heavy
        return job.spec.input_bytes > heavy_input_bytes
