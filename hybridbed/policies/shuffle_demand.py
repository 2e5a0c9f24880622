"""A job's shuffle between racks now: per rack pair, the bytes its running consumers fetch from parent tasks
on other racks (all of them, and those not fetched yet), for OCS demand hints.

Every parent/consumer partition is laid out once per job as a matrix (parent tasks x consumers) and summed
per source rack for each consumer, again only when parent tasks moved; what consumers fetch is added to
those sums as they fetch it. A hint then costs a product of racks x running consumers per job, not a pass
over every partition (the paper's Fig. 5 job, 3472 maps into 169 reducers, has 586,768 of them, and hints
come every interval). The byte counts are integers, exact in float64, so the order of the sums does not
matter.
"""

from __future__ import annotations

import itertools

import numpy as np

from hybridbed.scheduler.model import Job, TaskState


class ShuffleMatrix:
    """Bytes from each parent task (rows) to each consumer (columns) of one job; 0 where a consumer does
    not read that task. Kept summed per source rack (racks x consumers), of all and of what was fetched."""

    def __init__(self, job: Job, racks: int):
        self.parents = [t for stage in job.stages if stage.children for t in stage.tasks]
        self.consumers = job.reduces
        self.racks = racks
        self._row = {t.task_id: i for i, t in enumerate(self.parents)}
        self.bytes = np.zeros((len(self.parents), len(self.consumers)))
        first_col = 0  # the consumers are the tasks of the stages with parents, stage after stage
        for index, stage in enumerate(job.stages):
            if not stage.parents:
                continue
            cols = slice(first_col, first_col + len(stage.tasks))
            first_col = cols.stop
            for source in job.sources_of(stage.tasks[0]):  # the same for every task of the stage
                self.bytes[self._row[source.task_id], cols] = source.partition_bytes[index].sizes()  # a row at once
        self._src = np.full(len(self.parents), -1)  # each parent's rack as the sums have it (-1: not placed)
        self._fetched = np.zeros(self.bytes.shape, dtype=bool)
        self._marked = [(-1, 0)] * len(self.consumers)  # (attempt, count of `Task.fetched`) marked so far
        self._by_src = np.zeros((racks, len(self.consumers)))  # bytes per source rack, per consumer
        self._fetched_by_src = np.zeros((racks, len(self.consumers)))  # of them, fetched

    def rack_pairs(self, rack_of: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """(aggregate, remaining), racks x racks: the bytes the running consumers on rack dst read from
        parent tasks placed on other racks src, and those of them not fetched yet."""
        racks = self.racks
        running = [c for c, task in enumerate(self.consumers) if task.state is TaskState.RUNNING]
        if not running:
            return np.zeros((racks, racks)), np.zeros((racks, racks))
        src = np.array([rack_of[t.host] if t.host is not None else -1 for t in self.parents])
        if not np.array_equal(src, self._src):
            self._src = src
            placed = np.zeros((len(src), racks))  # one-hot: parent -> its rack
            placed[np.flatnonzero(src >= 0), src[src >= 0]] = 1.0
            self._by_src = placed.T @ self.bytes
            self._fetched_by_src = placed.T @ (self.bytes * self._fetched)
        for c in running:
            self._mark_fetched(c)
        at_dst = np.zeros((len(running), racks))  # one-hot: running consumer -> its rack
        at_dst[np.arange(len(running)), [rack_of[self.consumers[c].host] for c in running]] = 1.0
        aggregate = self._by_src[:, running] @ at_dst
        fetched = self._fetched_by_src[:, running] @ at_dst
        np.fill_diagonal(aggregate, 0.0)  # a rack's own shuffle does not cross
        np.fill_diagonal(fetched, 0.0)
        return aggregate, aggregate - fetched

    def _mark_fetched(self, col: int) -> None:
        """Mark what the consumer fetched since last marked (all of it afresh for a new attempt), and add it to
        its fetched bytes per source rack."""
        consumer = self.consumers[col]
        attempt, count = self._marked[col]
        if attempt != consumer.attempt:
            self._fetched[:, col] = False
            self._fetched_by_src[:, col] = 0.0
            count = 0
        if len(consumer.fetched) > count:
            rows = np.array([self._row[source] for source in itertools.islice(consumer.fetched, count, None)])
            self._fetched[rows, col] = True
            placed = rows[self._src[rows] >= 0]
            np.add.at(self._fetched_by_src[:, col], self._src[placed], self.bytes[placed, col])
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
                    matrix = self._matrices[job.job_id] = ShuffleMatrix(job, racks)
                last = self._last[job.job_id] = (state, *matrix.rack_pairs(rack_of))
            aggregate += last[1]
            remaining += last[2]
        return aggregate, remaining
