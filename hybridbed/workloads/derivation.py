"""From job sizes to tasks: the rate model that every workload source (SWIM trace, generator) shares.

Traces such as SWIM give bytes only (input, shuffle, output per job). The task structure follows
Hadoop's rules: one map per input split (the HDFS block), one reducer per `reduce_input_bytes` of
shuffle, and no cap on either: a job with more tasks than the cluster has containers runs in waves.
Task durations follow a processing-rate model:

    map compute    = task_overhead_s + split bytes / map_rate
    reduce compute = task_overhead_s + (fetched bytes + output bytes) / reduce_rate

Network transfer time is not in these numbers: it is what the emulated network (or the simulator's
flow model) makes of the bytes. `scale` shrinks every byte count together with the link rates; the
rates above are applied to the shrunk bytes after being shrunk by the same factor, so compute times
stay what they would be at full scale. `compute_scale` reckons compute on a share of the full-scale
bytes instead: the JobPacker paper's GENI emulation shrank every task's input and output by 100
(§5.1.3), so a task that really processed its data computed on a hundredth of it, while its transfers,
over links shrunk alike, took as long as at full scale.

The defaults are Hadoop's and the JobPacker paper's: the split is HDFS's default block; the bytes per
reducer give the paper's Fig. 5 job (about 90 GB of shuffle, §4.3.1) its 169 reducers; the rates give
its tasks the durations Fig. 5's latencies imply (config/constants.py says how;
tests/unit/test_planning.py reproduces the table from them). A scenario that needs coarser tasks (an emulation on one small machine) sets its own shape
and says why.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from hybridbed.config.constants import (
    HADOOP_BLOCK_BYTES,
    MAP_RATE_BYTES_S,
    REDUCE_INPUT_BYTES,
    REDUCE_RATE_BYTES_S,
    TASK_OVERHEAD_S,
)
from hybridbed.scheduler.model import JobSpec, Predicted


@dataclass(frozen=True)
class JobShape:
    block_bytes: int = HADOOP_BLOCK_BYTES
    reduce_input_bytes: int = REDUCE_INPUT_BYTES
    max_maps: int | None = None  # a cap only a scenario sets, and says why
    max_reduces: int | None = None
    map_rate_bytes_s: float = MAP_RATE_BYTES_S
    reduce_rate_bytes_s: float = REDUCE_RATE_BYTES_S
    task_overhead_s: float = TASK_OVERHEAD_S
    compute_scale: float = 1.0


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
    n_maps = max(1, math.ceil(inp / block))
    n_reduces = math.ceil(shuf / max(1, shape.reduce_input_bytes * scale)) if shuf else 0
    n_maps = min(n_maps, shape.max_maps or n_maps)
    n_reduces = min(n_reduces, shape.max_reduces or n_reduces)
    rate_scale = scale / shape.compute_scale
    map_rate, reduce_rate = shape.map_rate_bytes_s * rate_scale, shape.reduce_rate_bytes_s * rate_scale
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
