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

import bisect
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from hybridbed.policies.locality import DelayScheduling, LocalityParams
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Job, Task
from hybridbed.scheduler.policy import Policy

OfferKey = tuple[float, float, str]  # (share, arrival, job id): the order jobs are offered a container in


class FairPolicy(Policy):
    name = "fair"
    summary = "YARN Fair: equal container share per job, delay scheduling for map locality, reduces anywhere"
    Params = LocalityParams
    params: LocalityParams

    def __init__(self, **params: object):
        super().__init__(**params)
        self.locality = DelayScheduling(self.params)
        self._round: _OfferOrder | None = None  # during a round of offers: the jobs in offer order

    @contextmanager
    def offer_round(self, cluster: ClusterState) -> Iterator[None]:
        """The launchable jobs are sorted once per round: within it only the job last offered to changes its
        share. With 10,000 jobs waiting, sorting them at each of 90,000 offers took minutes."""
        self._round = _OfferOrder(lambda job: self.offer_key(job, cluster))
        try:
            yield
        finally:
            self._round = None

    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        if self._round is None:  # asked outside a round (a policy's tests): sort now
            return self.pick(host, cluster, cluster.launchable.values())
        task = self.first_task(host, cluster, self._round.ordered(cluster), self._round.waiting)
        if task is not None:
            self._round.launched(cluster.jobs[task.job_id])
        return task

    def share(self, job: Job, cluster: ClusterState) -> float:
        """How much of the cluster the job holds; the job holding least is offered first."""
        return job.n_running

    def offer_key(self, job: Job, cluster: ClusterState) -> OfferKey:
        return (self.share(job, cluster), job.spec.arrival_s, job.job_id)

    def pick(self, host: HostState, cluster: ClusterState, jobs: Iterable[Job]) -> Task | None:
        """Fair's choice among the given jobs (planning policies hand it the jobs their plan leaves out)."""
        return self.first_task(host, cluster, sorted(jobs, key=lambda job: self.offer_key(job, cluster)))

    def first_task(
        self, host: HostState, cluster: ClusterState, ordered: Iterable[Job], waiting: set[str] | None = None
    ) -> Task | None:
        """The first task the jobs, in offer order, have for the host. A job whose task needs more cores or
        memory than the host has free is passed over. `waiting` (kept by a round of offers) collects the jobs
        found with nothing to start but a node-local map (`DelayScheduling.node_local_only`, and no released
        reduce): until the round ends they are passed over at hosts holding none of their blocks without
        being asked again: at 10x scale, where an offer passes thousands of jobs, Fair's offers over 1000 jobs
        took 2.0 s instead of 7.8 s (docs/reproductions.md, simulator speed)."""
        for job in ordered:
            if waiting is not None and job.job_id in waiting:
                if cluster.pending[job.job_id].node_local(host.name) is None:
                    continue
                waiting.discard(job.job_id)  # its node-local map starts its wait afresh: asked in full
            task = self.locality.map_for(job, host, cluster) or cluster.released_reduce(job)
            if task is None:
                if waiting is not None and self.locality.node_local_only(job, cluster):
                    waiting.add(job.job_id)
            elif host.can_run(task, cores=self.allocates_cores):
                return task
        return None


class _OfferOrder:
    """A round's launchable jobs in offer order, sorted when first asked for. Launching a task changes its
    job's share and may leave the job with nothing to launch; nothing else changes within a round, so only
    that job moves."""

    def __init__(self, key: Callable[[Job], OfferKey]) -> None:
        self.key = key
        self.keys: list[OfferKey] | None = None
        self.jobs: list[Job] = []
        self._launched: tuple[OfferKey, Job] | None = None  # the job the last offer launched a task of
        self.waiting: set[str] = set()  # jobs with nothing but node-local maps for this round (`first_task`)

    def ordered(self, cluster: ClusterState) -> list[Job]:
        """The launchable jobs in offer order now."""
        if self.keys is None:
            keyed = sorted((self.key(job), job) for job in cluster.launchable.values())  # unique keys (job ids)
            self.keys, self.jobs = [k for k, _ in keyed], [job for _, job in keyed]
        elif self._launched is not None:  # move it to where its new share puts it (out, if it has nothing now)
            (old, job), self._launched = self._launched, None
            i = bisect.bisect_left(self.keys, old)
            del self.keys[i], self.jobs[i]
            if job.job_id in cluster.launchable:
                new = self.key(job)
                i = bisect.bisect_left(self.keys, new)
                self.keys.insert(i, new)
                self.jobs.insert(i, job)
        return self.jobs

    def launched(self, job: Job) -> None:
        """An offer is launching a task of `job` (its key is still the one it is sorted by)."""
        self._launched = (self.key(job), job)


class FairSlotsPolicy(FairPolicy):
    """Fair in slots mode, the Tetris paper's baseline (§5.1: Fair with slots defined on memory, 2 GB at
    Facebook, "none of them consider disk or network"): a task needs a free container and its memory, and
    nothing else, so CPU, disk and network are over-committed and the tasks on a host share what it has."""

    name = "fair-slots"
    summary = "YARN Fair with memory slots only (Tetris's baseline): CPU, disk and network over-committed"
    allocates_cores = False
