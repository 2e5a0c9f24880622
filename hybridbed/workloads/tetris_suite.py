"""The Tetris paper's deployment workload (§5.1): jobs drawn uniformly from four size/selectivity
classes, each stage either high-memory (8 GB) or low-memory (2 GB) and either CPU-heavy (many cores,
little I/O) or I/O-heavy (one core, a large share of the host's disk and network).

- Classes: large & highly selective (input:output 1:0.2), medium & inflating (1:2), medium & selective
  (1:0.5), small & selective (1:0.5). The paper's sizes (a couple of thousand, 1000, hundreds of tasks
  on 250 servers) become `maps_large/medium/small` maps, for the cluster at hand.
- Bytes: one block per map; the maps' output (the shuffle) is the input times the class's ratio; a
  reducer takes two blocks' worth of shuffle and writes what it fetched.
- Demands: an I/O-heavy task asks `io_share` of its host's disk and network bandwidth and computes for
  `io_heavy_s`, so its I/O sets its duration; a CPU-heavy one computes for `cpu_heavy_s` and asks just
  the rates that spread its bytes over that time. A map reads its block at its disk-read (or, remote,
  network-in) rate and writes its output at its disk-write rate; a reducer fetches at its network-in
  rate and writes at its disk-write rate.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from hybridbed.scheduler.model import JobSpec, Resources

CLASSES = (("large", 0.2), ("medium", 2.0), ("medium", 0.5), ("small", 0.5))  # (size, output / input)
MB = 1_000_000


@dataclass(frozen=True)
class SuiteShape:
    maps_large: int = 200
    maps_medium: int = 100
    maps_small: int = 30
    block_bytes: int = 256 * MB
    cpu_heavy_cores: float = 4.0
    io_share: float = 0.25  # of a host's disk and network bandwidth, for an I/O-heavy task
    cpu_heavy_s: float = 20.0
    io_heavy_s: float = 2.0
    memory_gb: tuple[float, float] = (2.0, 8.0)


@dataclass(frozen=True)
class HostBandwidth:
    """A host's bandwidths (Mb/s at the run's scale) that the demands are shares of."""

    disk_read_mbps: float
    disk_write_mbps: float
    net_mbps: float


def stage_demand(
    io_heavy: bool,
    memory_gb: float,
    read_bytes: int,
    write_bytes: int,
    net_bytes: int,
    shape: SuiteShape,
    host: HostBandwidth,
) -> tuple[Resources, float]:
    """A task's demand and modelled compute time; byte counts are one task's, rates in Mb/s."""
    if io_heavy:
        share = shape.io_share
        rates = (
            host.disk_read_mbps * share if read_bytes else 0.0,
            host.disk_write_mbps * share if write_bytes else 0.0,
            host.net_mbps * share if net_bytes else 0.0,
        )
        return Resources(1.0, memory_gb * 1000, rates[0], rates[1], rates[2], 0.0), shape.io_heavy_s
    spread = [
        min(size * 8 / 1e6 / shape.cpu_heavy_s, cap)  # no more than the host has: then I/O sets the pace
        for size, cap in (
            (read_bytes, host.disk_read_mbps),
            (write_bytes, host.disk_write_mbps),
            (net_bytes, host.net_mbps),
        )
    ]
    return Resources(shape.cpu_heavy_cores, memory_gb * 1000, spread[0], spread[1], spread[2], 0.0), shape.cpu_heavy_s


def tetris_suite(
    n_jobs: int, rng: random.Random, shape: SuiteShape, host: HostBandwidth, scale: float, arrival_window_s: float = 0.0
) -> list[JobSpec]:
    """`n_jobs` jobs of the deployment suite, bytes at the run's scale, sorted by arrival (0: a batch)."""
    sizes = {"large": shape.maps_large, "medium": shape.maps_medium, "small": shape.maps_small}
    block = max(1, int(shape.block_bytes * scale))
    jobs = []
    for i in range(n_jobs):
        size, ratio = rng.choice(CLASSES)
        n_maps = sizes[size]
        shuffle = int(n_maps * block * ratio)
        n_reduces = max(1, math.ceil(shuffle / (2 * block)))
        per_reduce = shuffle // n_reduces
        map_demand, map_s = stage_demand(
            rng.random() < 0.5, rng.choice(shape.memory_gb), block, shuffle // n_maps, block, shape, host
        )
        reduce_demand, reduce_s = stage_demand(
            rng.random() < 0.5, rng.choice(shape.memory_gb), 0, per_reduce, per_reduce, shape, host
        )
        arrival = round(rng.uniform(0, arrival_window_s), 3) if arrival_window_s else 0.0
        jobs.append(
            JobSpec(
                f"job{i}-{size}",
                arrival,
                n_maps * block,
                shuffle,
                shuffle,
                n_maps,
                n_reduces,
                map_s,
                reduce_s,
                map_demand=map_demand,
                reduce_demand=reduce_demand,
            )
        )
    return sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
