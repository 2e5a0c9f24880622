"""The latency response function (LRF): how long a job takes on a given number of racks.

Corral (Jalaparti et al., SIGCOMM'15) models a MapReduce job on r racks as three sequential stages; the
JobPacker paper (Eq. 1) lets the map and reduce stages use different numbers of racks:

    L(r_map, r_red) = l_map(r_map) + l_shu(r_map, r_red) + l_red(r_red)

- l_map(r) = ceil(N_map / (r * C)) * t_map: the maps run in waves over the C containers of each of the
  r racks; l_red likewise. Corral's own paper (not in ../shared) refines this with measured
  per-task times; this wave form is the one its description and JobPacker's Fig. 5 imply.
- l_shu = D(r_map, r_red) / BW. The paper's D = D_s / (r_map * r_red) * (r_red - 1) is what one
  sending rack carries across racks when tasks are spread evenly and every map rack also hosts
  reduces. It misses the receiving side: with r_red = 1 and r_map = 6, one rack takes in 5/6 of the
  shuffle through its single OCS input port (or EPS downlink). hybridbed counts the busiest port,
  sender or receiver, given how many racks run both maps and reduces (`shared`):
      D = D_s / (r_map * r_red) * max(r_red - [shared = r_map], r_map - [shared = r_red])
  Before the racks are chosen the sets are taken to overlap as far as they can, which gives the
  paper's value whenever r_map = r_red, and the Fig. 2 transfer time (3 * 6.25) for its balanced
  4-rack example.
- BW is the OCS circuit rate when one rack pair's share of the shuffle, D_s / (r_map * r_red), exceeds
  the elephant threshold (so it would be lit), else the rack's EPS uplink rate. A model without an
  OCS (Corral, which plans to avoid cross-rack traffic, and F-EPS) always uses the EPS rate.

Planners see predicted characteristics only: a recurring job's predicted shuffle size and arrival;
task counts and per-task times come from the job's input, which is known when it is planned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hybridbed.scheduler.cluster import NetworkView
from hybridbed.scheduler.model import JobSpec


@dataclass(frozen=True)
class JobProfile:
    """What a planner knows about a job before it runs."""

    job_id: str
    arrival_s: float
    n_maps: int
    n_reduces: int
    shuffle_bytes: float
    input_bytes: float
    map_s: float
    reduce_s: float

    @classmethod
    def of(cls, spec: JobSpec) -> JobProfile:
        predicted = spec.predicted
        arrival = predicted.arrival_s if predicted else spec.arrival_s
        shuffle = predicted.shuffle_bytes if predicted else spec.shuffle_bytes
        return cls(
            spec.job_id,
            arrival,
            spec.n_maps,
            spec.n_reduces,
            shuffle,
            spec.input_bytes,
            spec.map_compute_s,
            spec.reduce_compute_s,
        )


def is_batch(jobs: list[JobProfile]) -> bool:
    """A batch: every job is predicted to arrive at the same time (else the online scenario)."""
    return len({j.arrival_s for j in jobs}) <= 1


class LatencyModel:
    def __init__(self, racks: int, containers_per_rack: int, network: NetworkView, ocs_aware: bool = True):
        if racks < 1 or containers_per_rack < 1:
            raise ValueError("a latency model needs at least one rack and one container per rack")
        self.racks = racks
        self.containers_per_rack = containers_per_rack
        self.network = network
        self.ocs_aware = ocs_aware and network.ocs_Bps > 0

    def waves(self, tasks: int, racks: int) -> int:
        return math.ceil(tasks / (racks * self.containers_per_rack)) if tasks else 0

    def map_latency(self, job: JobProfile, r_map: int) -> float:
        return self.waves(job.n_maps, r_map) * job.map_s

    def reduce_latency(self, job: JobProfile, r_red: int) -> float:
        return self.waves(job.n_reduces, r_red) * job.reduce_s

    def pair_bytes(self, job: JobProfile, r_map: int, r_red: int) -> float:
        """One (map rack, reduce rack) pair's share of the shuffle."""
        return job.shuffle_bytes / (r_map * r_red)

    def uses_ocs(self, job: JobProfile, r_map: int, r_red: int) -> bool:
        return self.ocs_aware and self.pair_bytes(job, r_map, r_red) > self.network.elephant_bytes

    def busiest_port_bytes(self, job: JobProfile, r_map: int, r_red: int, shared: int | None = None) -> float:
        """Cross-rack shuffle bytes through the busiest rack port (sending or receiving), when `shared`
        racks run both maps and reduces (default: as many as can)."""
        shared = min(r_map, r_red) if shared is None else shared
        sent = r_red - (1 if shared == r_map else 0)
        received = r_map - (1 if shared == r_red else 0)
        return self.pair_bytes(job, r_map, r_red) * max(sent, received)

    def shuffle_latency(self, job: JobProfile, r_map: int, r_red: int, shared: int | None = None) -> float:
        cross_rack = self.busiest_port_bytes(job, r_map, r_red, shared)
        rate = self.network.ocs_Bps if self.uses_ocs(job, r_map, r_red) else self.network.eps_uplink_Bps
        return cross_rack / rate

    def latency(self, job: JobProfile, r_map: int, r_red: int) -> float:
        """Eq. (1): the job's predicted duration on r_map map racks and r_red reduce racks."""
        return self.map_latency(job, r_map) + self.shuffle_latency(job, r_map, r_red) + self.reduce_latency(job, r_red)
