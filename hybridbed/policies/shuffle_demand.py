"""A job's shuffle between racks now: per rack pair, the bytes its running consumers fetch from parent tasks
on other racks (all of them, and those not fetched yet), for OCS demand hints.

Every parent/consumer partition is laid out once per job as a matrix (parent tasks x consumers); a hint
then costs a few array operations per job over its running consumers, not a Python loop over every
partition (a 1000-map job with 100 reducers has 100,000 of them, and hints come every interval).
"""

from __future__ import annotations

import itertools

import numpy as np

from hybridbed.scheduler.model import Job, TaskState


class ShuffleMatrix:
    """Bytes from each parent task (rows) to each consumer (columns) of one job; 0 where a consumer does
    not read that task."""

    def __init__(self, job: Job):
        self.parents = [t for stage in job.stages if stage.children for t in stage.tasks]
        self.consumers = job.reduces
        self._row = {t.task_id: i for i, t in enumerate(self.parents)}
        self.bytes = np.zeros((len(self.parents), len(self.consumers)))
        for col, consumer in enumerate(self.consumers):
            for source in job.sources_of(consumer):
                self.bytes[self._row[source.task_id], col] = source.partition_for(consumer)
        # what each consumer has fetched, marked as far as its (attempt, count of `Task.fetched`) says
        self._fetched = np.zeros(self.bytes.shape, dtype=bool)
        self._marked = [(-1, 0)] * len(self.consumers)

    def rack_pairs(self, rack_of: dict[str, int], racks: int) -> tuple[np.ndarray, np.ndarray]:
        """(aggregate, remaining), racks x racks: the bytes the running consumers on rack dst read from
        parent tasks placed on other racks src, and those of them not fetched yet."""
        running = [c for c, task in enumerate(self.consumers) if task.state is TaskState.RUNNING]
        if not running:
            return np.zeros((racks, racks)), np.zeros((racks, racks))
        dst = np.array([rack_of[self.consumers[c].host] for c in running])
        src = np.array([rack_of[t.host] if t.host is not None else -1 for t in self.parents])
        part = self.bytes[:, running]
        cross = (src[:, None] >= 0) & (src[:, None] != dst[None, :]) & (part > 0)
        for c in running:
            self._mark_fetched(c)
        fetched = self._fetched[:, running]
        pair = src[:, None] * racks + dst[None, :]
        left = cross & ~fetched
        size = racks * racks
        aggregate = np.bincount(pair[cross], part[cross], size).reshape(racks, racks)
        remaining = np.bincount(pair[left], part[left], size).reshape(racks, racks)
        return aggregate, remaining

    def _mark_fetched(self, col: int) -> None:
        """Mark what the consumer fetched since last marked (all of it afresh for a new attempt)."""
        consumer = self.consumers[col]
        attempt, count = self._marked[col]
        if attempt != consumer.attempt:
            self._fetched[:, col] = False
            count = 0
        if len(consumer.fetched) > count:
            new = itertools.islice(consumer.fetched, count, None)
            self._fetched[[self._row[source] for source in new], col] = True
        self._marked[col] = (consumer.attempt, len(consumer.fetched))


class ShuffleDemand:
    """The jobs' rack-pair shuffle, each job's recomputed only when its tasks moved on since the last time
    (a task started or finished, another set of consumers runs, a consumer fetched more); a job is
    forgotten once done."""

    def __init__(self) -> None:
        self._matrices: dict[str, ShuffleMatrix] = {}
        self._last: dict[str, tuple[tuple, np.ndarray, np.ndarray]] = {}

    def rack_pairs(self, jobs: list[Job], rack_of: dict[str, int], racks: int) -> tuple[np.ndarray, np.ndarray]:
        """(aggregate, remaining) racks x racks summed over the jobs, as `ShuffleMatrix.rack_pairs` has them."""
        aggregate, remaining = np.zeros((racks, racks)), np.zeros((racks, racks))
        for job in jobs:
            if job.done:
                self._matrices.pop(job.job_id, None)
                self._last.pop(job.job_id, None)
                continue
            running = [t for t in job.reduces if t.state is TaskState.RUNNING]
            if not running:
                continue
            fetched = sum(len(t.fetched) for t in running)
            state = (job.launches, tuple(job.stage_done), tuple(t.task_id for t in running), fetched)
            last = self._last.get(job.job_id)
            if last is None or last[0] != state:
                matrix = self._matrices.get(job.job_id)
                if matrix is None:
                    matrix = self._matrices[job.job_id] = ShuffleMatrix(job)
                last = self._last[job.job_id] = (state, *matrix.rack_pairs(rack_of, racks))
            aggregate += last[1]
            remaining += last[2]
        return aggregate, remaining
