"""Deadlines for a workload's jobs, from each job's critical path (DSP's experiments need them)."""

from __future__ import annotations

import random
from dataclasses import replace

from hybridbed.scheduler.dag_paths import stage_critical_paths
from hybridbed.scheduler.model import JobSpec, Resources, build_job


def with_deadlines(
    specs: list[JobSpec], rng: random.Random, slack: tuple[float, float], default_demand: Resources
) -> list[JobSpec]:
    """The jobs with deadlines: each its arrival plus its critical path (task durations at their allotted
    rates, as alone on the cluster) times a factor drawn uniformly from `slack`. DSP's paper does not say
    how its deadlines were set; a multiple of the job's own shortest possible run is the usual choice."""
    low, high = slack
    dated = []
    for spec in specs:
        critical_path = max(stage_critical_paths(build_job(spec, default_demand)))
        dated.append(replace(spec, deadline_s=spec.arrival_s + rng.uniform(low, high) * max(critical_path, 1e-3)))
    return dated
