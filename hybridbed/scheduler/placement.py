"""HDFS-like input placement: each block gets `replicas` copies on distinct hosts, over two racks.

The default rule is HDFS's for a client outside the cluster: the first replica on a random host, the
second on a host of another rack, the third on another host of the second replica's rack (or of a third
rack when that rack has no other host). A policy may restrict the first replica to a set of racks
(JobPacker's map racks, Corral's job racks).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from hybridbed.scheduler.model import Job


def choose_replicas(
    hosts_by_rack: Mapping[int, Sequence[str]],
    rng: random.Random,
    replicas: int = 3,
    first_racks: list[int] | None = None,
) -> tuple[str, ...]:
    racks = sorted(r for r, hosts in hosts_by_rack.items() if hosts)
    candidates = [r for r in (first_racks or racks) if hosts_by_rack.get(r)]
    if not candidates:
        raise ValueError(f"no live host in racks {first_racks}")
    first_rack = rng.choice(candidates)
    chosen = [rng.choice(hosts_by_rack[first_rack])]
    others = [r for r in racks if r != first_rack]
    if replicas > 1 and others:
        second_rack = rng.choice(others)
        chosen.append(rng.choice(hosts_by_rack[second_rack]))
        spare = [h for h in hosts_by_rack[second_rack] if h not in chosen]
        if replicas > 2 and spare:
            chosen.append(rng.choice(spare))
    if len(chosen) < replicas:  # small racks: the rest anywhere
        pool = [h for r in racks for h in hosts_by_rack[r] if h not in chosen]
        chosen.extend(rng.sample(pool, min(replicas - len(chosen), len(pool))))
    return tuple(chosen)


def place_job_input(
    job: Job,
    hosts_by_rack: Mapping[int, Sequence[str]],
    rng: random.Random,
    replicas: int = 3,
    first_racks: list[int] | None = None,
) -> None:
    """Give every map's input block its replica hosts."""
    for task in job.maps:
        task.input_block = replace(
            task.input_block, replicas=choose_replicas(hosts_by_rack, rng, replicas, first_racks)
        )
