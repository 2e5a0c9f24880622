"""The YARN Fair Scheduler: equal container shares across jobs, with delay scheduling for map locality.

Two modes: `fair` allocates cores and memory (YARN's dominant-resource calculator) and over-commits disk and
network; `fair-slots` allocates memory slots alone (YARN's default resource calculator, the Tetris paper's
baseline) and over-commits cores too.

On every free container the job furthest below its share (fewest running containers; ties by arrival)
is offered it. Its map tasks wait for locality (`locality.DelayScheduling`: node-local, then after
`node_delay_s` rack-local, then after `rack_delay_s` more any map). Reduces run anywhere once slowstart has
released them, and only when the job has no map to start there: reducers that took containers ahead
of pending maps would sit idle waiting for those maps (the MapReduce AM limits their ramp-up for the
same reason).
"""

from __future__ import annotations

from collections.abc import Iterable

from hybridbed.policies.locality import DelayScheduling, LocalityParams
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Job, Task
from hybridbed.scheduler.policy import Policy


class FairPolicy(Policy):
    name = "fair"
    summary = "YARN Fair: equal container share per job, delay scheduling for map locality, reduces anywhere"
    Params = LocalityParams
    params: LocalityParams

    def __init__(self, **params: object):
        super().__init__(**params)
        self.locality = DelayScheduling(self.params)

    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        return self.pick(host, cluster, cluster.launchable.values())

    def share(self, job: Job, cluster: ClusterState) -> float:
        """How much of the cluster the job holds; the job holding least is offered first."""
        return job.n_running

    def pick(self, host: HostState, cluster: ClusterState, jobs: Iterable[Job]) -> Task | None:
        """Fair's choice among the given jobs (planning policies hand it the jobs their plan leaves out).
        A job whose task needs more cores or memory than the host has free is passed over."""
        for job in sorted(jobs, key=lambda j: (self.share(j, cluster), j.spec.arrival_s, j.job_id)):
            task = self.locality.map_for(job, host, cluster) or cluster.released_reduce(job)
            if task is not None and host.can_run(task, cores=self.allocates_cores):
                return task
        return None


class FairSlotsPolicy(FairPolicy):
    """Fair in slots mode, the Tetris paper's baseline (§5.1: Fair with slots defined on memory, 2 GB at
    Facebook, "none of them consider disk or network"): a task needs a free container and its memory, and
    nothing else, so CPU, disk and network are over-committed and the tasks on a host share what it has."""

    name = "fair-slots"
    summary = "YARN Fair with memory slots only (Tetris's baseline): CPU, disk and network over-committed"
    allocates_cores = False
