"""Paths through a job's stage DAG: levels, critical paths, and the deadlines a workload derives from them."""
from __future__ import annotations

import random
from dataclasses import replace

from hybridbed.scheduler.model import Job, JobSpec, Resources, build_job
from hybridbed.scheduler.transfers import expected_duration_s


def stage_levels(job: Job) -> list[int]:
    """Each stage's distance in stages from the roots (stages come in topological order)."""
    levels: list[int] = []
    for stage in job.stages:
        levels.append(1 + max((levels[p] for p in stage.parents), default=-1))
    return levels


def stage_critical_paths(job: Job) -> list[float]:
    """Each stage's longest path of task durations from its start to the end of the job."""
    paths = [0.0] * len(job.stages)
    for i in reversed(range(len(job.stages))):
        stage = job.stages[i]
        paths[i] = expected_duration_s(stage.tasks[0]) + max((paths[c] for c in stage.children), default=0.0)
    return paths


def with_deadlines(specs: list[JobSpec], rng: random.Random, slack: tuple[float, float],
                   default_demand: Resources) -> list[JobSpec]:
    """The jobs with deadlines: each its arrival plus its critical path (task durations at their allotted
    rates, as alone on the cluster) times a factor drawn uniformly from `slack`. DSP's paper does not say
    how its deadlines were set; a multiple of the job's own shortest possible run is the usual choice."""
    low, high = slack
    dated = []
    for spec in specs:
        critical_path = max(stage_critical_paths(build_job(spec, default_demand)))
        dated.append(replace(spec, deadline_s=spec.arrival_s + rng.uniform(low, high) * max(critical_path, 1e-3)))
    return dated
