"""From job sizes to tasks: the rate model that every workload source (SWIM trace, generator) shares.

Traces such as SWIM give bytes only (input, shuffle, output per job). The task structure follows
Hadoop's rules: one map per input block, one reducer per `reduce_input_bytes` of shuffle. Task
durations follow a processing-rate model:

    map compute    = task_overhead_s + block bytes / map_rate
    reduce compute = task_overhead_s + (fetched bytes + output bytes) / reduce_rate

Network transfer time is not in these numbers: it is what the emulated network (or the simulator's
flow model) makes of the bytes. `scale` shrinks every byte count together with the link rates; the
rates above are applied to the shrunk bytes after being shrunk by the same factor, so compute times
stay what they would be at full scale.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from hybridbed.scheduler.model import JobSpec, Predicted

MB = 1_000_000


@dataclass(frozen=True)
class JobShape:
    block_bytes: int = 128 * MB
    reduce_input_bytes: int = 1_000 * MB
    max_maps: int = 200
    max_reduces: int = 50
    map_rate_bytes_s: float = 64 * MB
    reduce_rate_bytes_s: float = 64 * MB
    task_overhead_s: float = 1.0


@dataclass(frozen=True)
class Predictions:
    """How predicted characteristics of recurring jobs differ from the actual ones.

    `size_error` is the relative error |real - predicted| / real of the shuffle size (drawn uniformly up
    to this bound, sign random); a fraction `arrival_jitter_fraction` of jobs has its predicted arrival
    off by up to `arrival_jitter_s` either way.
    """

    recurring_fraction: float = 1.0
    size_error: float = 0.0
    arrival_jitter_fraction: float = 0.0
    arrival_jitter_s: float = 0.0


def derive_job(
    job_id: str,
    arrival_s: float,
    input_bytes: int,
    shuffle_bytes: int,
    output_bytes: int,
    shape: JobShape,
    scale: float,
    recurring: bool,
    predicted: Predicted | None = None,
) -> JobSpec:
    """A JobSpec from full-scale sizes: bytes scaled, task counts and compute times from the rate model."""
    inp, shuf, out = (int(round(b * scale)) for b in (input_bytes, shuffle_bytes, output_bytes))
    block = max(1, int(shape.block_bytes * scale))
    n_maps = min(shape.max_maps, max(1, math.ceil(inp / block)))
    n_reduces = min(shape.max_reduces, math.ceil(shuf / max(1, shape.reduce_input_bytes * scale))) if shuf else 0
    map_rate, reduce_rate = shape.map_rate_bytes_s * scale, shape.reduce_rate_bytes_s * scale
    map_s = shape.task_overhead_s + inp / n_maps / map_rate
    reduce_s = shape.task_overhead_s + ((shuf + out) / n_reduces / reduce_rate if n_reduces else 0.0)
    if predicted is not None:
        predicted = Predicted(
            predicted.arrival_s,
            *(int(round(b * scale)) for b in (predicted.input_bytes, predicted.shuffle_bytes, predicted.output_bytes)),
        )
    return JobSpec(
        job_id, arrival_s, inp, shuf, out, n_maps, n_reduces, round(map_s, 3), round(reduce_s, 3), recurring, predicted
    )


def predict(
    arrival_s: float,
    input_bytes: int,
    shuffle_bytes: int,
    output_bytes: int,
    predictions: Predictions,
    rng: random.Random,
) -> Predicted:
    """Predicted characteristics of a recurring job, with the configured errors injected."""
    error = rng.uniform(0, predictions.size_error) * rng.choice((-1, 1))
    jitter = 0.0
    if rng.random() < predictions.arrival_jitter_fraction:
        jitter = rng.uniform(-predictions.arrival_jitter_s, predictions.arrival_jitter_s)
    return Predicted(max(0.0, arrival_s + jitter), input_bytes, max(0, int(shuffle_bytes * (1 + error))), output_bytes)


def make_jobs(
    sizes: list[tuple[str, float, int, int, int]],
    shape: JobShape,
    scale: float,
    predictions: Predictions,
    rng: random.Random,
) -> list[JobSpec]:
    """JobSpecs from (id, arrival, input, shuffle, output) rows: recurring ones get predictions."""
    jobs = []
    for job_id, arrival, inp, shuf, out in sizes:
        recurring = rng.random() < predictions.recurring_fraction
        predicted = predict(arrival, inp, shuf, out, predictions, rng) if recurring else None
        jobs.append(derive_job(job_id, arrival, inp, shuf, out, shape, scale, recurring, predicted))
    return jobs
