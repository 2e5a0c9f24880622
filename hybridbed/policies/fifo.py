"""FIFO: jobs in arrival order; the oldest job with a task that fits the host takes the container."""

from __future__ import annotations

from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Task
from hybridbed.scheduler.policy import Policy


class FifoPolicy(Policy):
    name = "fifo"
    summary = "jobs in arrival order; the oldest job's best-local map, else its released reduces (YARN FIFO)"

    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        for job in sorted(cluster.launchable.values(), key=lambda j: (j.spec.arrival_s, j.job_id)):
            task = cluster.best_map(job, host)[0] or cluster.released_reduce(job)
            if task is not None and host.can_run(task):
                return task
        return None
