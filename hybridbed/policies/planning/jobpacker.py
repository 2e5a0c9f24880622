"""JobPacker's offline scheduler (§4.3): the job profiler and the job manager.

Profiler (§4.3.1). A recurring job is shuffle-heavy when its predicted shuffle reaches the elephant
threshold. Its feasible (r_map, r_red) pairs, the "green zone", are those that
  (a) keep its parallelism: the map and reduce stages run in as few waves as on the whole cluster
      (the paper gives no number; this is the rule that reproduces its Fig. 5 zone), and
  (b) use the OCS: one rack pair's share of the shuffle exceeds the elephant threshold.
If no pair satisfies both, the pairs that satisfy (b) with the lowest latency are used, and failing
that the lowest-latency pair.

Job manager (§4.3.2).
- Width: max(r_map + r_red) over the green zone for a shuffle-heavy job, (N_map + N_red) / C for the
  rest.
- Batch: the jobs are split into B sub-batches by Tetris-style packing. A job's demand is (shuffle
  bytes, maps, reduces), each normalised by the workload's total / B, so every sub-batch has capacity
  (1, 1, 1); the sub-batch with the most capacity left (as a Tetris machine with the most free
  resources asks first) takes the unassigned job whose demand has the largest dot product with its
  remaining capacity (negative remainders count as zero). Each sub-batch is sorted
  by width, then predicted latency, both descending; the sub-batches are concatenated in random order.
- Online: jobs in order of predicted arrival, ties as within a sub-batch.
- List scheduling over container free times: a non-shuffle-heavy job takes the earliest-free
  containers anywhere for its maps, then for its reduces (which start after the maps plus the EPS
  shuffle time); a shuffle-heavy job tries every green-zone pair on a copy of the timeline (map racks:
  the r_map racks where ceil(N_map / r_map) containers free first; reduce racks likewise, from the
  end of the maps, map racks first among equals; the shuffle time from how far the two overlap) and
  keeps the pair that completes first.
- Over-provisioning: each stage books ceil(N * (1 + ratio)) containers, so later jobs are planned
  around the slack; at run time the slack is free for ad-hoc jobs and other recurring work.
"""

from __future__ import annotations

import math
import random

import numpy as np

from hybridbed.policies.planning.latency import JobProfile, LatencyModel, is_batch
from hybridbed.policies.planning.timeline import JobPlan, Plan, Timeline
from hybridbed.scheduler.model import StageKind

Pair = tuple[int, int]


def is_shuffle_heavy(job: JobProfile, model: LatencyModel) -> bool:
    return job.n_reduces > 0 and job.shuffle_bytes >= model.network.elephant_bytes


def green_zone(job: JobProfile, model: LatencyModel) -> list[Pair]:
    """The profiler's feasible (r_map, r_red) pairs for a shuffle-heavy job."""
    pairs = [(m, r) for m in range(1, model.racks + 1) for r in range(1, model.racks + 1)]
    fewest_map_waves = model.waves(job.n_maps, model.racks)
    fewest_reduce_waves = model.waves(job.n_reduces, model.racks)
    on_ocs = [p for p in pairs if model.uses_ocs(job, *p)]
    zone = [
        (m, r)
        for m, r in on_ocs
        if model.waves(job.n_maps, m) == fewest_map_waves and model.waves(job.n_reduces, r) == fewest_reduce_waves
    ]
    if zone:
        return zone
    candidates = on_ocs or pairs
    best = min(model.latency(job, *p) for p in candidates)
    return [p for p in candidates if model.latency(job, *p) <= best + 1e-9]


def sub_batches(jobs: list[JobProfile], count: int) -> list[list[JobProfile]]:
    """Split a batch into `count` sub-batches of similar total demand (Tetris-style dot-product packing)."""
    if not jobs:
        return []
    demand = np.array([[j.shuffle_bytes, j.n_maps, j.n_reduces] for j in jobs], dtype=float)
    share = demand.sum(axis=0) / count
    demand = np.divide(demand, share, out=np.zeros_like(demand), where=share > 0)
    remaining = np.ones((count, 3))
    batches: list[list[JobProfile]] = [[] for _ in range(count)]
    unassigned = list(range(len(jobs)))
    while unassigned:
        b = int(np.argmax(np.maximum(remaining, 0.0).sum(axis=1)))  # the emptiest sub-batch picks next
        scores = demand[unassigned] @ np.maximum(remaining[b], 0.0)
        pick = unassigned.pop(int(np.argmax(scores)))
        batches[b].append(jobs[pick])
        remaining[b] -= demand[pick]
    return [b for b in batches if b]


class JobPackerPlanner:
    def __init__(
        self,
        model: LatencyModel,
        sub_batch_count: int = 5,
        overprovision: float = 0.0,
        rng: random.Random | None = None,
    ):
        self.check(sub_batch_count, overprovision)
        self.model = model
        self.sub_batch_count = sub_batch_count
        self.overprovision = overprovision
        self.rng = rng or random.Random(0)
        self.zones: dict[str, list[Pair]] = {}

    @staticmethod
    def check(sub_batch_count: int, overprovision: float) -> None:
        if sub_batch_count < 1:
            raise ValueError(f"sub_batches must be at least 1, got {sub_batch_count}")
        if overprovision < 0:
            raise ValueError(f"overprovision must not be negative, got {overprovision}")

    def width(self, job: JobProfile) -> float:
        if job.job_id in self.zones:
            return max(m + r for m, r in self.zones[job.job_id])
        return (job.n_maps + job.n_reduces) / self.model.containers_per_rack

    def predicted_latency(self, job: JobProfile) -> float:
        pairs = self.zones.get(job.job_id, [(self.model.racks, self.model.racks)])
        return min(self.model.latency(job, *p) for p in pairs)

    def _within_batch(self, job: JobProfile) -> tuple:
        return (-self.width(job), -self.predicted_latency(job), job.job_id)

    def order(self, jobs: list[JobProfile]) -> list[JobProfile]:
        """The job list the manager schedules, per the batch or the online rule."""
        if not is_batch(jobs):
            return sorted(jobs, key=lambda j: (j.arrival_s, *self._within_batch(j)))
        batches = [sorted(b, key=self._within_batch) for b in sub_batches(jobs, self.sub_batch_count)]
        self.rng.shuffle(batches)
        return [j for b in batches for j in b]

    def plan(self, jobs: list[JobProfile]) -> Plan:
        self.zones = {j.job_id: green_zone(j, self.model) for j in jobs if is_shuffle_heavy(j, self.model)}
        timeline = Timeline(self.model.racks, self.model.containers_per_rack)
        plan = Plan()
        for job in self.order(jobs):
            if job.job_id in self.zones:
                best = min(
                    self.zones[job.job_id],
                    key=lambda pair: self._finish_key(self._place_on_racks(job, pair, timeline.scratch_copy())),
                )
                job_plan = self._place_on_racks(job, best, timeline)
            else:
                job_plan = self._place_anywhere(job, timeline)
            plan.add(job_plan)
        plan.finish(timeline)
        return plan

    @staticmethod
    def _finish_key(placed: JobPlan) -> tuple:
        """Earliest completion; ties to fewer racks, then lower rack numbers (deterministic)."""
        return (
            placed.end_s,
            len(placed.maps.racks) + len(placed.reduces.racks),
            placed.maps.racks,
            placed.reduces.racks,
        )

    def _booked(self, tasks: int) -> int:
        return math.ceil(tasks * (1 + self.overprovision))

    def _place_on_racks(self, job: JobProfile, pair: Pair, timeline: Timeline) -> JobPlan:
        r_map, r_red = pair
        n_maps, n_reduces = self._booked(job.n_maps), self._booked(job.n_reduces)
        map_racks = timeline.earliest_racks(r_map, math.ceil(n_maps / r_map), job.arrival_s)
        maps = timeline.book(job.job_id, StageKind.MAP, map_racks, n_maps, job.map_s, job.arrival_s)
        # reduce racks: those free soonest once the maps are done, map racks first among equals (they
        # keep part of the shuffle inside the rack); the shuffle time then follows from the overlap
        reduce_racks = timeline.earliest_racks(r_red, math.ceil(n_reduces / r_red), maps.end_s, prefer=map_racks)
        shared = len(set(map_racks) & set(reduce_racks))
        shuffle_done = maps.end_s + self.model.shuffle_latency(job, r_map, r_red, shared)
        reduces = timeline.book(job.job_id, StageKind.REDUCE, reduce_racks, n_reduces, job.reduce_s, shuffle_done)
        return JobPlan(job.job_id, maps, reduces, uses_ocs=self.model.uses_ocs(job, r_map, r_red))

    def _place_anywhere(self, job: JobProfile, timeline: Timeline) -> JobPlan:
        maps = timeline.book_anywhere(job.job_id, StageKind.MAP, self._booked(job.n_maps), job.map_s, job.arrival_s)
        if not job.n_reduces:
            return JobPlan(job.job_id, maps, None)
        r_map = len(maps.racks)
        shuffle_done = maps.end_s + self.model.shuffle_latency(job, r_map, min(r_map, job.n_reduces))
        reduces = timeline.book_anywhere(
            job.job_id, StageKind.REDUCE, self._booked(job.n_reduces), job.reduce_s, shuffle_done
        )
        return JobPlan(job.job_id, maps, reduces)
