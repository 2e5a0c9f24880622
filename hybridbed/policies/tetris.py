"""Tetris (Grandl et al., SIGCOMM'14): multi-resource packing with a remaining-work (SRTF) term, a
fairness knob and barrier hints.

When a host has room, every job among the ⌈(1 − f)·|J|⌉ furthest below their fair share (f the
fairness knob; share by DRF or slots) offers its candidate tasks (if none of theirs fits the host, the
other jobs do, so that the knob never leaves a host idle that a task fits): one per stage that may run (a root
stage's best-located task, the first pending task of a released stage). A candidate must fit the host's free resources in every modelled dimension (cores, memory,
disk read/write, network in/out), so nothing is over-allocated. Its score is

    alignment − ε · remaining work

- alignment (§3.2): the dot product of the host's free resources and the task's peak demand as placed
  there (a map reading its block locally takes disk reads and no network in; reading it remotely,
  network in and no local disk), both divided by the host's capacity, over every modelled dimension;
  times (1 − remote_penalty) when the map reads its block from another host. A reduce fetches from
  wherever its parents ran, wherever it is placed: no penalty, which would only rank reduces below maps.
- remaining work (§3.3.1): over the job's tasks still to be scheduled, the sum of their normalised
  demands times their duration at their allotted rates (`transfers.expected_duration_s`); lower goes
  first, so a job that has started wins ties and jobs finish one after another, as SRTF intends. The
  paper writes a + ε·p but means the job with less work first, so the term is subtracted (as DAGPS does
  with its srpt term).
- ε = m · ā / p̄ (§3.3.2), the averages over this decision's candidates; m = 1 by default.
- Barrier knob b (§3.5): once a fraction b of a stage's tasks have finished, its remaining tasks are
  offered the host first (among them the score decides); a job's last stages end at a barrier too.
The scheduler core asks again while the host has room, so several tasks go out per heartbeat
("bundling").

Free resources (§4.1): cores and memory as allocated; disk and network bandwidth as the host's resource
tracker last measured them in use (`HostState.tracked_free`: both backends report every heartbeat), plus
the allotments of the tasks started since, so that what a task leaves unused of its peak demand (a
reducer's disk writes while it fetches, a selective map's writes once written) is packed with other
tasks. A map reading its block from another host also takes disk-read and network-out bandwidth there
(the scheduler core holds it for every policy; Tetris checks it is free, as allocated, before choosing
the map). Not modelled: the sources of a reducer's fetches.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import Field

from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Job, Resources, Task
from hybridbed.scheduler.pending import PendingTasks
from hybridbed.scheduler.policy import Policy, PolicyParams
from hybridbed.scheduler.transfers import expected_duration_s

CandidateT = TypeVar("CandidateT")


@dataclass(slots=True)
class Candidate:
    """A job's offer for the host: one of its stages (a stage's tasks share their demand; the best located
    one is picked once the stage is chosen)."""

    job: Job
    stage: int
    alignment: float
    remaining_work: float
    promoted: bool  # past the barrier knob


@functools.lru_cache(maxsize=4096)  # few distinct (demand, capacity) pairs, asked at every decision
def normalised(demand: Resources, capacity: Resources) -> tuple[float, ...]:
    """The demand as fractions of the capacity, over the dimensions the capacity models."""
    return tuple(d / c for d, c in zip(demand.vector(), capacity.vector()) if c > 0)


def alignment(free: Resources, demand: Resources, capacity: Resources) -> float:
    """Tetris's packing score: the dot product of free resources and demand, both normalised by capacity."""
    return sum(f * d for f, d in zip(normalised(free, capacity), normalised(demand, capacity)))


def best_first(pool: list[CandidateT], key: Callable[[CandidateT], Any]) -> Iterator[CandidateT]:
    """The pool by `key`, highest first (ties in pool order), sorted only if the best is turned down: a
    choice needs the best candidate alone unless its remote read finds no room at its block's source."""
    best = max(pool, key=key)
    yield best
    yield from (c for c in sorted(pool, key=key, reverse=True) if c is not best)


class PackingScores:
    """The alignment of each demand with a host's free resources, None where it does not fit in every
    modelled dimension; worked out once per distinct demand in a decision (jobs share few). Kept by the
    demand's identity, which skips hashing its fields (stages alike share one demand object,
    `ClusterState.stage_offers`); each entry holds its demand, so that no identity is reused meanwhile."""

    def __init__(self, free: Resources, capacity: Resources):
        self.free, self.capacity = free, capacity
        self._scores: dict[int, tuple[Resources, float | None]] = {}

    def of(self, demand: Resources) -> float | None:
        known = self._scores.get(id(demand))
        if known is None:
            fits = demand.fits_in(self.free, self.capacity)
            known = self._scores[id(demand)] = (demand, alignment(self.free, demand, self.capacity) if fits else None)
        return known[1]


def remaining_work(pending: PendingTasks, capacity: Resources) -> float:
    """The normalised demands times durations of the job's tasks still to be scheduled, summed."""
    work = 0.0
    for stage in pending.stages.values():
        task = stage.first()  # a stage's tasks share demand and duration
        if task is not None:
            work += len(stage.tasks) * sum(normalised(task.demand, capacity)) * expected_duration_s(task)
    return work


class RemainingWork:
    """`remaining_work` per job, recomputed only when the job's pending tasks changed."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple, float]] = {}  # job -> (pending revision and capacity, remaining work)

    def of(self, job_id: str, pending: PendingTasks, capacity: Resources) -> float:
        key = (pending.revision, capacity)
        cached = self._cache.get(job_id)
        if cached is None or cached[0] != key:
            if len(self._cache) > 4096:  # start afresh now and then, so finished jobs do not pile up
                self._cache.clear()
            cached = self._cache[job_id] = (key, remaining_work(pending, capacity))
        return cached[1]


class TetrisParams(PolicyParams):
    fairness: float = Field(
        default=0.25,
        ge=0,
        lt=1,
        description="f, the fairness knob (§3.4; 0.25 as the paper "
        "recommends): only the ceil((1 - f)|J|) jobs furthest below their share offer tasks",
    )
    barrier: float = Field(
        default=0.9, ge=0, le=1, description="b, the barrier knob (§3.5; the paper's 0.9; 1: no barrier hints)"
    )
    srtf_weight: float = Field(default=1.0, ge=0, description="m in epsilon = m a/p (§3.3.2; the paper's m = 1)")
    remote_penalty: float = Field(
        default=0.1,
        ge=0,
        lt=1,
        description="alignment x (1 - this) for a task that uses resources elsewhere (§3.2: the paper's 10%)",
    )
    fair_share: Literal["drf", "slots"] = Field(default="drf", description="how a job's share is measured")
    resources: Literal["all", "cores_memory"] = Field(
        default="all",
        description="what Tetris packs: all six dimensions, or cores and memory alone, over-allocating disks "
        "and network as YARN does (the paper's ablation, §5.3.1)",
    )
    usage_tracker: bool = Field(
        default=True,
        description="free disk and network bandwidth as the hosts' resource trackers measure them in use "
        "(§4.1), not as allocated; false: allocation-based, every task holding its peak demands",
    )


class TetrisPolicy(Policy):
    name = "tetris"
    summary = "Tetris: multi-resource packing (alignment) minus remaining work, fairness knob f, barrier knob b"

    Params = TetrisParams
    params: TetrisParams

    def __init__(self, **params: object):
        super().__init__(**params)
        self._work = RemainingWork()

    @property
    def reads_usage(self) -> bool:
        return self.params.usage_tracker

    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        if host.free_slots <= 0:
            return None
        ranked = self.ranked_jobs(cluster)
        eligible = self.eligible_count(len(ranked))
        capacity = host.capacity
        if self.params.resources == "cores_memory":  # bandwidths count as not modelled: neither fit nor score
            capacity = Resources(capacity.cores, capacity.memory_mb, 0, 0, 0, 0)
        scores = PackingScores(host.tracked_free() if self.params.usage_tracker else host.free, capacity)
        candidates = self.candidates(host, cluster, ranked[:eligible], scores)
        if not candidates:  # none of the jobs furthest below their share fits here: the others may
            candidates = self.candidates(host, cluster, ranked[eligible:], scores)
        if not candidates:
            return None
        promoted = [c for c in candidates if c.promoted]
        pool = promoted or candidates
        mean_alignment = sum(c.alignment for c in pool) / len(pool)
        mean_work = sum(c.remaining_work for c in pool) / len(pool)
        epsilon = self.params.srtf_weight * mean_alignment / mean_work if mean_work > 0 else 0.0
        for best in best_first(pool, lambda c: (c.alignment - epsilon * c.remaining_work, -c.job.spec.arrival_s)):
            task = cluster.best_in_stage(best.job, best.stage, host)[0]
            if self.params.resources == "cores_memory" or cluster.source_has_room(task, host):
                return task
        return None

    def ranked_jobs(self, cluster: ClusterState) -> list[Job]:
        """The launchable jobs, furthest below their fair share first."""
        share = cluster.dominant_share if self.params.fair_share == "drf" else (lambda job: job.n_running)
        return sorted(cluster.launchable.values(), key=lambda j: (share(j), j.spec.arrival_s, j.job_id))

    def eligible_count(self, jobs: int) -> int:
        """⌈(1 − f)·|J|⌉: how many of the ranked jobs the fairness knob lets offer tasks."""
        return math.ceil((1 - self.params.fairness) * jobs)

    def eligible_jobs(self, cluster: ClusterState) -> list[Job]:
        """The ⌈(1 − f)·|J|⌉ launchable jobs furthest below their fair share."""
        ranked = self.ranked_jobs(cluster)
        return ranked[: self.eligible_count(len(ranked))]

    def candidates(
        self, host: HostState, cluster: ClusterState, jobs: list[Job], scores: PackingScores
    ) -> list[Candidate]:
        """Each job's next task of every root stage (a remote read unless one has its block on this host)
        and of every released stage, where its demand as placed here fits the host's free resources. Jobs
        share few demand vectors, so each vector's fit and alignment is worked out once per decision."""
        found = []
        kept_remote, barrier = 1 - self.params.remote_penalty, self.params.barrier
        for job in jobs:
            work = None
            for offer in cluster.stage_offers(job):
                demand, remote = offer.placed(host.name)
                value = scores.of(demand)
                if value is None:
                    continue
                if work is None:
                    work = self._work.of(job.job_id, cluster.pending[job.job_id], scores.capacity)
                promoted = offer.finished >= barrier * offer.tasks
                found.append(Candidate(job, offer.stage, value * kept_remote if remote else value, work, promoted))
        return found


class TetrisNoDependenciesPolicy(TetrisPolicy):
    """DSP's TetrisW/oDep baseline: Tetris blind to the DAG, so a stage's tasks may start as soon as their
    parent tasks have (they hold their containers waiting for the parents' outputs; each is a disorder)."""

    name = "tetris-nodep"
    summary = "Tetris without dependency handling: child stages start before their parents are done"
    respects_precedence = False
