"""A job's shuffle between racks now: per rack pair, the bytes its running consumers fetch from parent tasks
on other racks (all of them, and those not fetched yet), for OCS demand hints.

Every parent/consumer partition is laid out once per job as a matrix (parent tasks x consumers); a hint
then costs a few array operations per job over its running consumers, not a Python loop over every
partition (a 1000-map job with 100 reducers has 100,000 of them, and hints come every interval).
"""

from __future__ import annotations

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
        fetched = np.zeros_like(cross)
        for col, c in enumerate(running):
            fetched[[self._row[s] for s in self.consumers[c].fetched], col] = True
        pair = src[:, None] * racks + dst[None, :]
        left = cross & ~fetched
        size = racks * racks
        aggregate = np.bincount(pair[cross], part[cross], size).reshape(racks, racks)
        remaining = np.bincount(pair[left], part[left], size).reshape(racks, racks)
        return aggregate, remaining


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
