"""The latency response function (LRF): how long a job takes on a given number of racks.

Corral (Jalaparti et al., SIGCOMM'15) models a MapReduce job on r racks as three sequential stages; the
JobPacker paper (Eq. 1) lets the map and reduce stages use different numbers of racks:

    L(r_map, r_red) = l_map(r_map) + l_shu(r_map, r_red) + l_red(r_red)

- l_map(r) = ceil(N_map / (r * C)) * t_map: the maps run in waves over the C containers of each of the
  r racks; l_red likewise. Corral's own paper (not in ../shared) refines this with measured
  per-task times; this wave form is the one its description and JobPacker's Fig. 5 imply.
- l_shu: the paper's D(r_map, r_red) / BW, with D = D_s / (r_map * r_red) * (r_red - 1) what one
  sending rack carries across racks when tasks are spread evenly and every map rack also hosts
  reduces. It misses the receiving side: with r_red = 1 and r_map = 6, one rack takes in 5/6 of the
  shuffle through its single port. hybridbed counts the rack pairs at the busiest port, sender or
  receiver, given how many racks run both maps and reduces (`shared`):
      pairs = max(r_red - [shared = r_map], r_map - [shared = r_red])
  and prices them by what carries them:
  - OCS, when one rack pair's share D_s / (r_map * r_red) exceeds the elephant threshold (so it would be
    lit): a port has one circuit, so its pairs go one configuration after another,
        l_shu = pairs * pair_bytes / circuit rate,
    which is the paper's D / BW whenever r_map = r_red, and the Fig. 2 transfer time (3 * 6.25 for its
    balanced 4-rack example).
  - EPS otherwise: the pairs go at once, each at its share of the oversubscribed ToR uplink, which under
    a full cluster (what a plan packs) every rack shares with the R - 1 racks it sends to:
        l_shu = pair_bytes / (uplink / (R - 1)).
  A model without an OCS (Corral, which plans to avoid cross-rack traffic, and F-EPS) always uses the
  EPS price. Before the racks are chosen the sets are taken to overlap as far as they can.

  The paper's Fig. 5 EPS zone (401 at r_map = 6 falling to 280 at 15, about 1195 s / r_map over the
  green zone) implies 0.56-0.6 Gb/s for a sending rack's whole D, 1/50 of its §5.1.2 30 Gb/s uplink; no
  sharing of that uplink in its 15- or 20-rack setting gives so little, so hybridbed keeps the price the
  fabric implies and its Fig. 5 EPS zone stays a few seconds above the green zone
  (tests/unit/test_planning.py).

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

    @property
    def eps_pair_Bps(self) -> float:
        """One rack pair's share of a ToR's EPS uplink when the rack sends to every other rack."""
        return self.network.eps_uplink_Bps / max(1, self.racks - 1)

    @staticmethod
    def busiest_port_pairs(r_map: int, r_red: int, shared: int | None = None) -> int:
        """Rack pairs through the busiest rack port (sending or receiving), when `shared` racks run both
        maps and reduces (default: as many as can)."""
        shared = min(r_map, r_red) if shared is None else shared
        sent = r_red - (1 if shared == r_map else 0)
        received = r_map - (1 if shared == r_red else 0)
        return max(sent, received)

    def busiest_port_bytes(self, job: JobProfile, r_map: int, r_red: int, shared: int | None = None) -> float:
        """Cross-rack shuffle bytes through the busiest rack port."""
        return self.pair_bytes(job, r_map, r_red) * self.busiest_port_pairs(r_map, r_red, shared)

    def shuffle_latency(self, job: JobProfile, r_map: int, r_red: int, shared: int | None = None) -> float:
        """The port's pairs one circuit after another over the OCS, or all at once over the EPS."""
        if not self.busiest_port_pairs(r_map, r_red, shared):
            return 0.0
        if self.uses_ocs(job, r_map, r_red):
            return self.busiest_port_bytes(job, r_map, r_red, shared) / self.network.ocs_Bps
        return self.pair_bytes(job, r_map, r_red) / self.eps_pair_Bps

    def latency(self, job: JobProfile, r_map: int, r_red: int) -> float:
        """Eq. (1): the job's predicted duration on r_map map racks and r_red reduce racks."""
        return self.map_latency(job, r_map) + self.shuffle_latency(job, r_map, r_red) + self.reduce_latency(job, r_red)
