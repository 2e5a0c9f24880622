"""The YARN Fair Scheduler: equal container shares across jobs, with delay scheduling for map locality.

On every free container the job furthest below its share (fewest running containers; ties by arrival)
is offered it. Its map tasks wait for locality (Zaharia et al., EuroSys'10, as YARN's time-based
`locality-delay-node-ms` / `locality-delay-rack-ms`): a job that cannot launch a node-local map is
skipped until it has waited `node_delay_s`, then it may launch rack-local maps, and after a further
`rack_delay_s` any map. A local launch resets the wait. Reduces run anywhere once slowstart has
released them, and only when the job has no map to start there: reducers that took containers ahead
of pending maps would sit idle waiting for those maps (the MapReduce AM limits their ramp-up for the
same reason).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field

from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Job, Task
from hybridbed.scheduler.policy import Policy, PolicyParams


class FairParams(PolicyParams):
    # Delay scheduling (Zaharia et al., EuroSys'10) as YARN's time-based locality-delay-node-ms and
    # locality-delay-rack-ms; YARN leaves both off by default, 1 s (two heartbeats) is hybridbed's choice.
    node_delay_s: float = Field(default=1.0, ge=0, description="a job waits this long for a node-local map")
    rack_delay_s: float = Field(default=1.0, ge=0, description="then this much longer for a rack-local one")


class FairPolicy(Policy):
    name = "fair"
    summary = "YARN Fair: equal container share per job, delay scheduling for map locality, reduces anywhere"
    Params = FairParams
    params: FairParams

    def __init__(self, **params: object):
        super().__init__(**params)
        self._waiting_since: dict[str, float] = {}

    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        return self.pick(host, cluster, cluster.launchable.values())

    def share(self, job: Job, cluster: ClusterState) -> float:
        """How much of the cluster the job holds; the job holding least is offered first."""
        return job.n_running

    def pick(self, host: HostState, cluster: ClusterState, jobs: Iterable[Job]) -> Task | None:
        """Fair's choice among the given jobs (planning policies hand it the jobs their plan leaves out).
        A job whose task needs more cores or memory than the host has free is passed over."""
        for job in sorted(jobs, key=lambda j: (self.share(j, cluster), j.spec.arrival_s, j.job_id)):
            task = self._map_after_delay(job, host, cluster) or cluster.released_reduce(job)
            if task is not None and host.can_run(task):
                return task
        return None

    def _map_after_delay(self, job: Job, host: HostState, cluster: ClusterState) -> Task | None:
        pending = cluster.pending[job.job_id]
        if not pending.maps:
            return None
        task = pending.node_local(host.name)
        if task is not None:
            self._waiting_since.pop(job.job_id, None)
            return task
        waited = cluster.now - self._waiting_since.setdefault(job.job_id, cluster.now)
        if waited < self.params.node_delay_s:
            return None
        if waited < self.params.node_delay_s + self.params.rack_delay_s:
            return pending.rack_local(host.rack)
        return pending.rack_local(host.rack) or pending.any_map()
