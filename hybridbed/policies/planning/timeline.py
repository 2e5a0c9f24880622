"""Offline list scheduling over container free times, the T_ik of JobPacker §4.3.2, and the plan it builds.

A planner walks its ordered job list; each stage of a job books containers on chosen racks: the
stage's tasks are split evenly over the racks, and on each rack every task takes the container that
frees up first (so more tasks than containers run in waves). The timeline is a racks x containers
array of free times; a candidate placement is tried on a copy and committed only if chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from hybridbed.scheduler.model import StageKind, split_evenly


@dataclass(frozen=True)
class StagePlacement:
    racks: tuple[int, ...]
    start_s: float
    end_s: float


@dataclass(frozen=True)
class JobPlan:
    job_id: str
    maps: StagePlacement
    reduces: StagePlacement | None  # None for a map-only job
    uses_ocs: bool = False

    @property
    def end_s(self) -> float:
        return (self.reduces or self.maps).end_s


@dataclass(frozen=True)
class Booking:
    """One planned task: container `container` of `rack` runs a `kind` task of `job_id` from start to end."""

    job_id: str
    kind: StageKind
    rack: int
    container: int
    start_s: float
    end_s: float


@dataclass
class Plan:
    """The offline schedule: where each planned job runs, and each rack's sequence of (job, stage)."""

    jobs: dict[str, JobPlan] = field(default_factory=dict)
    sequences: dict[int, list[tuple[str, StageKind]]] = field(default_factory=dict)
    bookings: list[Booking] = field(default_factory=list)
    # (rack, job, stage) -> the containers of the rack the stage is booked on: how many of its tasks run there at once
    widths: dict[tuple[int, str, StageKind], int] = field(default_factory=dict)

    @property
    def makespan_s(self) -> float:
        return max((p.end_s for p in self.jobs.values()), default=0.0)

    def mean_completion_s(self, arrivals: dict[str, float]) -> float:
        return float(np.mean([p.end_s - arrivals[j] for j, p in self.jobs.items()])) if self.jobs else 0.0

    def add(self, plan: JobPlan) -> None:
        self.jobs[plan.job_id] = plan

    def finish(self, timeline: Timeline) -> None:
        """Keep the timeline's bookings and derive each rack's sequence: its stages by first planned start."""
        self.bookings = timeline.bookings
        first: dict[tuple[int, str, StageKind], float] = {}
        containers: dict[tuple[int, str, StageKind], set[int]] = {}
        for b in self.bookings:
            key = (b.rack, b.job_id, b.kind)
            first[key] = min(first.get(key, b.start_s), b.start_s)
            containers.setdefault(key, set()).add(b.container)
        self.widths = {key: len(used) for key, used in containers.items()}
        self.sequences = {r: [] for r in range(timeline.racks)}
        for (rack, job_id, kind), _ in sorted(first.items(), key=lambda e: (e[1], e[0][1], e[0][2].value)):
            self.sequences[rack].append((job_id, kind))


class Timeline:
    """Container free times T[rack, container], and every booking made (for checks and plots).

    Each rack's free times are kept sorted (with the container each belongs to beside them), so
    "when are k containers of every rack free" is one column, not a partition per query: the planners
    ask it for every candidate placement of every job."""

    def __init__(self, racks: int, containers_per_rack: int):
        self.free = np.zeros((racks, containers_per_rack))  # ascending along each row
        self.ids = np.tile(np.arange(containers_per_rack), (racks, 1))  # the container of each free time
        self.bookings: list[Booking] = []
        self.records = True  # a scratch copy only times a placement

    @property
    def racks(self) -> int:
        return self.free.shape[0]

    @property
    def containers_per_rack(self) -> int:
        return self.free.shape[1]

    def scratch_copy(self) -> Timeline:
        """The same free times, recording no bookings: for trying a placement before committing it."""
        other = Timeline.__new__(Timeline)
        other.free, other.ids, other.bookings, other.records = self.free.copy(), self.ids.copy(), [], False
        return other

    def ready_s(self, per_rack: int, not_before: float) -> np.ndarray:
        """For every rack, when `per_rack` of its containers are free (all of them if it has fewer)."""
        return np.maximum(self.free[:, min(per_rack, self.containers_per_rack) - 1], not_before)

    def earliest_racks(
        self, count: int, per_rack: int, not_before: float, prefer: tuple[int, ...] = ()
    ) -> tuple[int, ...]:
        """The `count` racks that can start `per_rack` tasks soonest; ties go to `prefer`red racks, then
        to the less booked rack."""
        ready = self.ready_s(per_rack, not_before)
        preferred = np.zeros(self.racks, dtype=bool)
        preferred[list(prefer)] = True
        order = np.lexsort((np.arange(self.racks), self.free.sum(axis=1), ~preferred, ready))
        return tuple(sorted(int(r) for r in order[:count]))

    def book(
        self, job_id: str, kind: StageKind, racks: tuple[int, ...], tasks: int, duration_s: float, not_before: float
    ) -> StagePlacement:
        """Spread `tasks` evenly over `racks`, each task on the rack's container that frees first;
        returns the stage's racks, start (first task) and end (last task)."""
        counts = split_evenly(tasks, len(racks))
        if tasks < len(racks):  # racks without a task are not the stage's
            racks, counts = tuple(r for r, c in zip(racks, counts) if c), [c for c in counts if c]
        return self._book(job_id, kind, racks, counts, duration_s, not_before)

    def book_anywhere(
        self, job_id: str, kind: StageKind, tasks: int, duration_s: float, not_before: float
    ) -> StagePlacement:
        """The `tasks` containers that free first anywhere in the cluster (all of them, in waves, when
        there are more tasks than containers)."""
        if tasks >= self.free.size:
            return self.book(job_id, kind, tuple(range(self.racks)), tasks, duration_s, not_before)
        ready = np.maximum(self.free, not_before).ravel()
        chosen = np.argsort(ready, kind="stable")[:tasks] // self.containers_per_rack
        counts = np.bincount(chosen, minlength=self.racks)
        racks = tuple(int(r) for r in np.flatnonzero(counts))
        return self._book(job_id, kind, racks, counts[counts > 0].tolist(), duration_s, not_before)

    def _book(
        self,
        job_id: str,
        kind: StageKind,
        racks: tuple[int, ...],
        counts: list[int],
        duration_s: float,
        not_before: float,
    ) -> StagePlacement:
        """`counts[i]` tasks (at least one) on rack `racks[i]`."""
        if not racks:
            return StagePlacement((), not_before, not_before)
        begins, racks_taken, containers, first, last = _book_racks(
            self.free,
            self.ids,
            np.array(racks, dtype=np.int64),
            np.array(counts, dtype=np.int64),
            duration_s,
            not_before,
        )
        if self.records:
            self.bookings += [
                Booking(job_id, kind, int(r), int(k), float(b), float(b) + duration_s)
                for b, r, k in zip(begins, racks_taken, containers)
            ]
        return StagePlacement(tuple(sorted(racks)), first, last + duration_s)


@numba.njit(cache=True)
def _book_racks(free, ids, racks, tasks, duration, not_before):  # pragma: no cover (compiled)
    """`tasks[i]` tasks on rack `racks[i]`, list-scheduled (`_list_schedule`); every booked row is sorted
    again. Returns each task's start, rack and container, and the first and last start."""
    total = tasks.sum()
    begins = np.empty(total)
    racks_taken = np.empty(total, dtype=np.int64)
    containers = np.empty(total, dtype=np.int64)
    done = 0
    for i in range(racks.size):
        rack, count = racks[i], tasks[i]
        row, row_ids = free[rack], ids[rack]
        starts, slots = _list_schedule(row, count, duration, not_before)
        begins[done : done + count] = starts
        racks_taken[done : done + count] = rack
        containers[done : done + count] = row_ids[slots]
        done += count
        _sort_again(row, row_ids, min(count, row.size))
    return begins, racks_taken, containers, begins.min(), begins.max()


@numba.njit(cache=True)
def _sort_again(row, ids, changed):  # pragma: no cover (compiled)
    """Sort `row` (and `ids` with it) again after its first `changed` free times rose: sort those, then merge
    them with the rest, which is still sorted (a stable sort of the whole row, in linear time)."""
    order = np.argsort(row[:changed], kind="mergesort")
    head, head_ids = row[:changed][order], ids[:changed][order]
    i, j, out = 0, changed, 0
    while i < changed:
        if j < row.size and row[j] < head[i]:
            row[out], ids[out] = row[j], ids[j]
            j += 1
        else:
            row[out], ids[out] = head[i], head_ids[i]
            i += 1
        out += 1


@numba.njit(cache=True)
def _list_schedule(row, count, duration, not_before):  # pragma: no cover (compiled)
    """`count` tasks of `duration` on a rack whose free times `row` are ascending, each on the container
    that frees first (ties to the lower position): their starts in order and the positions they take;
    `row` gets each container's new free time. A container taken at t frees at t + duration, so the
    containers taken again come back in the order they were taken: the earliest is either the next
    container not yet taken (the row is sorted) or the head of that queue, no heap needed."""
    fresh = min(count, row.size)  # only the first `count` containers can ever be the earliest one
    begins = np.empty(count)
    slots = np.empty(count, dtype=np.int64)
    again_at = np.empty(count)  # the queue of containers taken, with the time each frees again
    again_slot = np.empty(count, dtype=np.int64)
    head = nxt = 0  # the queue is again_*[head:task]
    for task in range(count):
        if nxt < fresh:
            t = max(row[nxt], not_before)
            if head == task or t < again_at[head] or (t == again_at[head] and nxt < again_slot[head]):
                begins[task], slots[task] = t, nxt
                nxt += 1
            else:
                begins[task], slots[task] = again_at[head], again_slot[head]
                head += 1
        else:
            begins[task], slots[task] = again_at[head], again_slot[head]
            head += 1
        again_at[task], again_slot[task] = begins[task] + duration, slots[task]
        row[slots[task]] = again_at[task]
    return begins, slots
