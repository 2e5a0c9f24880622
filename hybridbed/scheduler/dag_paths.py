"""Paths through a job's stage DAG: levels and critical paths."""

from __future__ import annotations

from hybridbed.scheduler.model import Job
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
