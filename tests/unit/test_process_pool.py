"""The process pool that comparisons and sweeps run simulated runs on: a worker that dies fails its run, an
error of the run itself is not mistaken for one."""

import os
import time

import pytest

from hybridbed.experiments.process_pool import POOL_WORKER_LOST, WorkerLost, as_runs_end, process_pool


def test_a_run_whose_worker_dies_is_reported_lost_by_name():
    with process_pool(1) as pool:
        results = dict(as_runs_end({pool.submit(os._exit, 3): "dies"}, POOL_WORKER_LOST))
    assert isinstance(results["dies"], WorkerLost)
    assert results["dies"].status.startswith("failed: worker lost: BrokenProcessPool")


def test_an_error_raised_by_the_run_itself_propagates_as_it_would_one_run_after_another():
    with pytest.raises(ValueError, match="invalid literal"), process_pool(1) as pool:
        list(as_runs_end({pool.submit(int, "not a number"): "bug"}, POOL_WORKER_LOST))


def test_every_run_ends_with_its_key_and_those_under_way_are_told_while_waiting():
    under_way: list[set[float]] = []
    with process_pool(2) as pool:
        futures = {pool.submit(time.sleep, seconds): seconds for seconds in (0.05, 0.1, 0.4)}
        results = dict(as_runs_end(futures, POOL_WORKER_LOST, lambda keys: under_way.append(set(keys)), 0.02))
    assert results == {0.05: None, 0.1: None, 0.4: None}
    assert under_way and all(keys <= set(results) for keys in under_way)
    assert under_way[-1] == {0.4}  # the longest run is the last one waited for
