"""The rack-pair shuffle of OCS hints (policies/shuffle_demand.py) against a plain loop over every partition,
as tasks start, move, finish and fetch, for MapReduce jobs and a DAG whose last stage reads two stages."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hybridbed.policies.shuffle_demand import ShuffleDemand
from hybridbed.scheduler.model import Job, JobSpec, Resources, StageSpec, TaskState, build_job, dag_spec

RACKS = 3
HOSTS = {f"r{r}h{h}": r for r in range(RACKS) for h in range(2)}


def plain_rack_pairs(jobs: list[Job]) -> tuple[np.ndarray, np.ndarray]:
    aggregate, remaining = np.zeros((RACKS, RACKS)), np.zeros((RACKS, RACKS))
    for job in jobs:
        for consumer in job.reduces:
            if consumer.state is not TaskState.RUNNING:
                continue
            dst = HOSTS[consumer.host]
            for source in job.sources_of(consumer):
                if source.host is None or HOSTS[source.host] == dst:
                    continue
                aggregate[HOSTS[source.host], dst] += source.partition_for(consumer)
                if source.task_id not in consumer.fetched:
                    remaining[HOSTS[source.host], dst] += source.partition_for(consumer)
    return aggregate, remaining


def start(job: Job, task, host: str) -> None:
    """(Re)start the task as the scheduler does: a restart is a new attempt, which has fetched nothing."""
    if task.host is not None:
        task.attempt += 1
    task.state, task.host, task.allocation = TaskState.RUNNING, host, Resources()
    task.fetched = {}
    job.task_started(task)


@pytest.mark.parametrize("seed", range(8))
def test_rack_pairs_follow_every_start_move_finish_and_fetch(seed):
    rng = random.Random(seed)
    jobs = [
        build_job(
            JobSpec(f"j{i}", 0, 10**6, rng.randint(10**5, 10**7), 0, rng.randint(1, 6), rng.randint(1, 4), 1, 1),
            Resources(),
        )
        for i in range(3)
    ]
    stages = (  # a DAG: b reads a; c reads a and b
        StageSpec("a", rng.randint(1, 4), 1.0, (), 10**6, rng.randint(10**5, 10**7)),
        StageSpec("b", rng.randint(1, 3), 1.0, (0,), 0, rng.randint(10**5, 10**7)),
        StageSpec("c", rng.randint(1, 3), 1.0, (0, 1), 0, 1000),
    )
    jobs.append(build_job(dag_spec("dag", 0, stages), Resources()))
    demand = ShuffleDemand()
    for _ in range(60):
        job = rng.choice(jobs)
        task = rng.choice(job.tasks)
        move = rng.random()
        if task.state is TaskState.PENDING or move < 0.1:  # (re)start it somewhere
            start(job, task, rng.choice(list(HOSTS)))
        elif move < 0.3 and task in job.maps:
            task.state = TaskState.DONE
            job.task_done(task.stage)
        elif task in job.reduces and task.state is TaskState.RUNNING:
            task.fetched[rng.choice(job.sources_of(task)).task_id] = None
        got = demand.rack_pairs(jobs, HOSTS, RACKS)
        expected = plain_rack_pairs(jobs)
        assert got[0] == pytest.approx(expected[0]) and got[1] == pytest.approx(expected[1])
    assert plain_rack_pairs(jobs)[0].sum() > 0  # the walk did put shuffle between racks
