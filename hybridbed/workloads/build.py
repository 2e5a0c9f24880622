"""A scenario's jobs: the workload section turned into job specs by the source it names (synthetic, SWIM
trace, Tetris suite, DAG queries), at the emulated scale, with deadlines where the scenario asks for them.
The same scenario and seed give the same jobs on every backend and for every setup of a comparison."""

from __future__ import annotations

import math
import random

from hybridbed.config.constants import MB
from hybridbed.config.scenario import DagSpec, Scenario, ShapeSpec, SuiteSpec
from hybridbed.scheduler.assembly import container, host_capacity
from hybridbed.scheduler.model import JobSpec
from hybridbed.workloads.dag import DagShape, dag_jobs
from hybridbed.workloads.deadlines import with_deadlines
from hybridbed.workloads.derivation import JobShape, Predictions, make_jobs
from hybridbed.workloads.swim import read_swim_files
from hybridbed.workloads.synthetic import facebook_like
from hybridbed.workloads.tetris_suite import HostBandwidth, SuiteShape, tetris_suite


def job_shape(spec: ShapeSpec) -> JobShape:
    return JobShape(
        int(spec.block_mb * MB),
        int(spec.reduce_input_mb * MB),
        spec.max_maps,
        spec.max_reduces,
        spec.map_rate_mb_s * MB,
        spec.reduce_rate_mb_s * MB,
        spec.task_overhead_s,
        spec.compute_scale,
    )


def suite_shape(spec: SuiteSpec) -> SuiteShape:
    return SuiteShape(
        spec.maps_large,
        spec.maps_medium,
        spec.maps_small,
        int(spec.block_mb * MB),
        spec.cpu_heavy_cores,
        spec.io_share,
        spec.cpu_heavy_s,
        spec.io_heavy_s,
        spec.memory_gb,
    )


def dag_shape(spec: DagSpec) -> DagShape:
    return DagShape(
        spec.benchmark,
        spec.templates,
        spec.fact_tasks,
        int(spec.reduce_input_mb * MB),
        spec.max_tasks,
        tuple(spec.size_factors),
        spec.compute_spread,
        spec.shared_scan,
    )


def build_workload(scenario: Scenario) -> list[JobSpec]:
    """The jobs of this scenario, at the emulated scale; the same seed gives the same jobs."""
    specs = _generate_jobs(scenario)
    if scenario.workload.deadline_slack is not None:  # their own random stream: the jobs stay the same
        specs = with_deadlines(
            specs, random.Random(f"deadlines-{scenario.seed}"), scenario.workload.deadline_slack, container(scenario)
        )
    return specs


def _generate_jobs(scenario: Scenario) -> list[JobSpec]:
    rng = random.Random(scenario.seed)
    w = scenario.workload
    if w.source in ("tetris-suite", "dag"):
        host = host_capacity(scenario)
        bandwidth = HostBandwidth(host.disk_read_mbps, host.disk_write_mbps, host.net_in_mbps)
        if w.source == "dag":
            return dag_jobs(
                w.jobs,
                rng,
                dag_shape(w.dag),
                suite_shape(w.suite),
                bandwidth,
                scenario.scale,
                w.arrival_window_s,
                w.dag.queues,
            )
        return tetris_suite(w.jobs, rng, suite_shape(w.suite), bandwidth, scenario.scale, w.arrival_window_s)
    if w.source == "swim":
        rows = read_swim_files(
            w.trace_files(), w.jobs, w.min_shuffle_gb * 1e9, w.max_shuffle_gb * 1e9 if w.max_shuffle_gb else math.inf
        )
        if w.arrival_window_s:
            rows = sorted(
                ((i, rng.uniform(0, w.arrival_window_s), inp, shuffle, out) for i, _, inp, shuffle, out in rows),
                key=lambda r: r[1],
            )
        else:
            rows = [(i, 0.0, inp, shuffle, out) for i, _, inp, shuffle, out in rows]
    else:
        cap = w.max_shuffle_gb * 1e9 if w.max_shuffle_gb else None
        rows = facebook_like(w.jobs, rng, w.arrival_window_s, cap)
    predictions = Predictions(**w.predictions.model_dump())
    return make_jobs(rows, job_shape(w.shape), scenario.scale, predictions, rng)
