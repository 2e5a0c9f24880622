"""A scenario's task counts against its trace: how Hadoop's rules (the default shape: 128 MB splits, 533 MB
per reducer, no caps) and the scenario's own shape turn the trace's job sizes into maps and reducers,
how many waves that makes on the scenario's cluster, and how many shuffle connections it implies (the
simulator's cost grows with them). No root needed:
    .venv/bin/python bench/workload_shape.py [SCENARIO.yaml]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from hybridbed.config.scenario import ShapeSpec
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.scheduler.model import JobSpec
from hybridbed.workloads.build import build_workload

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "jobpacker-paper-sim-coarse.yaml"
PERCENTILES = (5, 50, 95, 100)


def spread(values: list[float]) -> str:
    p = np.percentile(values, PERCENTILES)
    return " / ".join(f"{v:,.3g}" for v in p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", nargs="?", type=Path, default=SCENARIO)
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    hosts = scenario.fabric.racks * scenario.fabric.hosts_per_rack
    containers = hosts * scenario.workers.slots_per_host
    shapes = {"default (Hadoop, Fig. 5)": ShapeSpec(), "scenario's": scenario.workload.shape}
    jobs = {
        name: build_workload(
            scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"shape": shape})})
        )
        for name, shape in shapes.items()
    }
    any_jobs: list[JobSpec] = next(iter(jobs.values()))
    table = Table(
        title=f"{scenario.name}: {len(any_jobs)} jobs on {containers:,} containers ({hosts} hosts); p5 / p50 / p95 / max"
    )
    table.add_column("measure")
    for name in jobs:
        table.add_column(name, justify="right")
    scale = scenario.scale
    table.add_row("input GB (trace)", *[spread([j.input_bytes / scale / 1e9 for j in js]) for js in jobs.values()])
    table.add_row("shuffle GB (trace)", *[spread([j.shuffle_bytes / scale / 1e9 for j in js]) for js in jobs.values()])
    table.add_row("maps per job", *[spread([j.n_maps for j in js]) for js in jobs.values()])
    table.add_row("reducers per job", *[spread([j.n_reduces for j in js]) for js in jobs.values()])
    table.add_row(
        "map waves on the cluster", *[spread([math.ceil(j.n_maps / containers) for j in js]) for js in jobs.values()]
    )
    table.add_row(
        "jobs with 1 map and <= 1 reducer",
        *[f"{sum(j.n_maps == 1 and j.n_reduces <= 1 for j in js)}" for js in jobs.values()],
    )
    table.add_row(
        "maps, reducers in all",
        *[f"{sum(j.n_maps for j in js):,}, {sum(j.n_reduces for j in js):,}" for js in jobs.values()],
    )
    table.add_row(
        "container-hours of compute",
        *[
            f"{sum(j.n_maps * j.map_compute_s + j.n_reduces * j.reduce_compute_s for j in js) / 3600:,.0f}"
            for js in jobs.values()
        ],
    )
    # a reducer opens at least one connection per host that ran its job's maps (workers/shuffle.py)
    table.add_row(
        "shuffle connections, at least",
        *[f"{sum(j.n_reduces * min(j.n_maps, hosts) for j in js):,}" for js in jobs.values()],
    )
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
