"""Workload sources and scenario validation."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hybridbed.config.constants import (
    FIG5_MAP_S,
    FIG5_MAPS,
    FIG5_REDUCE_S,
    FIG5_REDUCES,
    FIG5_SHUFFLE_BYTES,
    HADOOP_BLOCK_BYTES,
)
from hybridbed.config.validation import SpecError
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.workloads.bounds import makespan_lower_bounds
from hybridbed.workloads.build import build_workload
from hybridbed.workloads.derivation import JobShape, Predictions, derive_job, make_jobs
from hybridbed.workloads.swim import TraceError, read_swim, read_swim_files
from hybridbed.workloads.synthetic import facebook_like
from hybridbed.workloads.tetris_suite import HostBandwidth, SuiteShape, tetris_suite

SWIM_SAMPLE = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "workloads"
    / "swim"
    / "FB-2009_samples_24_times_1hr_0_first50jobs.tsv"
)
REPO = Path(__file__).resolve().parents[2]
MB = 1_000_000


@pytest.mark.skipif(not SWIM_SAMPLE.exists(), reason="SWIM samples are not beside the checkout")
def test_swim_sample_is_read_in_order():
    rows = read_swim(SWIM_SAMPLE)
    assert len(rows) == 50
    assert rows[0] == ("job0", 49.0, 740773, 2339561, 627471)
    assert all(r[1] <= s[1] for r, s in zip(rows, rows[1:]))


def test_malformed_swim_line_names_its_line(tmp_path):
    trace = tmp_path / "t.tsv"
    trace.write_text("job0\t1\t1\t10\t20\t30\njob1\t2\t1\t10\tlots\t30\n")
    with pytest.raises(TraceError, match=r"t.tsv:2: .*lots"):
        read_swim(trace)
    trace.write_text("job0\t1\t1\t10\t20\n")
    with pytest.raises(TraceError, match=r"t.tsv:1: expected 6 tab-separated columns"):
        read_swim(trace)


def test_task_counts_and_durations_follow_the_rate_model():
    shape = JobShape(
        block_bytes=100, reduce_input_bytes=1000, map_rate_bytes_s=10, reduce_rate_bytes_s=20, task_overhead_s=1.0
    )
    job = derive_job("j", 0.0, 1_000, 2_500, 500, shape, 1.0, recurring=False)
    assert (job.n_maps, job.n_reduces) == (10, 3)
    assert job.map_compute_s == pytest.approx(1.0 + 100 / 10)
    assert job.reduce_compute_s == pytest.approx(1.0 + 3_000 / 3 / 20)
    scaled = derive_job("j", 0.0, 1_000, 2_500, 500, shape, 0.1, recurring=False)
    assert (scaled.n_maps, scaled.n_reduces, scaled.shuffle_bytes) == (10, 3, 250)
    assert scaled.map_compute_s == pytest.approx(job.map_compute_s)  # scale keeps compute times


def test_compute_scale_shrinks_the_bytes_compute_is_reckoned_on_and_nothing_else():
    """GENI's tasks processed a hundredth of their full-scale data: their compute shrinks, their overhead,
    task counts and bytes do not."""
    shape = JobShape(block_bytes=100, reduce_input_bytes=1000, map_rate_bytes_s=10, reduce_rate_bytes_s=20)
    full = derive_job("j", 0.0, 1_000, 2_500, 500, shape, 0.1, recurring=False)
    geni = derive_job("j", 0.0, 1_000, 2_500, 500, replace(shape, compute_scale=0.01), 0.1, recurring=False)
    overhead = shape.task_overhead_s
    assert (geni.n_maps, geni.n_reduces, geni.shuffle_bytes) == (full.n_maps, full.n_reduces, full.shuffle_bytes)
    assert geni.map_compute_s - overhead == pytest.approx((full.map_compute_s - overhead) / 100, abs=1e-3)
    assert geni.reduce_compute_s - overhead == pytest.approx((full.reduce_compute_s - overhead) / 100, abs=1e-3)


def test_the_default_shape_gives_the_fig5_job_its_tasks_and_durations_and_caps_nothing():
    """Hadoop's 128 MB split and Fig. 5's job (3472 maps, 169 reduces, about 90 GB of shuffle) at its task times."""
    shape = JobShape()
    job = derive_job("fig5", 0.0, FIG5_MAPS * HADOOP_BLOCK_BYTES, FIG5_SHUFFLE_BYTES, 0, shape, 1.0, recurring=False)
    assert (job.n_maps, job.n_reduces) == (FIG5_MAPS, FIG5_REDUCES)
    assert job.map_compute_s == pytest.approx(FIG5_MAP_S, abs=1e-3)
    assert job.reduce_compute_s == pytest.approx(FIG5_REDUCE_S, abs=0.5)  # 90 GB / 169 is not quite 533 MB
    huge = derive_job("huge", 0.0, 10**15, 10**14, 0, shape, 1.0, recurring=False)
    assert huge.n_maps == math.ceil(10**15 / HADOOP_BLOCK_BYTES) and huge.n_reduces == math.ceil(10**14 / 533e6)
    capped = derive_job("huge", 0.0, 10**15, 10**14, 0, JobShape(max_maps=40, max_reduces=20), 1.0, recurring=False)
    assert (capped.n_maps, capped.n_reduces) == (40, 20)


def test_synthetic_shuffle_sizes_match_the_paper_percentiles():
    rows = facebook_like(20_000, random.Random(1))
    shuffle = np.array([r[3] for r in rows]) / 1e9
    p5, p50, p95 = np.percentile(shuffle, [5, 50, 95])
    assert 0.06 < p5 < 0.12 and 2.2 < p50 < 2.8 and 70 < p95 < 95


def test_predictions_carry_the_injected_error():
    rows = [(f"j{i}", 0.0, 10**9, 10**9, 10**8) for i in range(200)]
    jobs = make_jobs(rows, JobShape(), 1.0, Predictions(size_error=0.3), random.Random(2))
    errors = [abs(j.predicted.shuffle_bytes - j.shuffle_bytes) / j.shuffle_bytes for j in jobs]
    assert max(errors) <= 0.3 + 1e-9 and np.mean(errors) > 0.1
    exact = make_jobs(rows, JobShape(), 1.0, Predictions(), random.Random(2))
    assert all(j.predicted.shuffle_bytes == j.shuffle_bytes for j in exact)


def test_quickstart_scenario_is_valid_and_deterministic():
    scenario = load_scenario(REPO / "scenarios" / "quickstart.yaml")
    assert build_workload(scenario) == build_workload(scenario)
    assert scenario.scaled_ocs().elephant_threshold_bytes == pytest.approx(
        scenario.ocs.elephant_threshold_bytes * scenario.scale
    )


@pytest.mark.parametrize(
    "change, field",
    [
        ({"fabric": {"racks": 0, "hosts_per_rack": 2}}, "fabric.racks"),
        ({"workers": {"slots_per_host": 8, "memory_mb_per_host": 1024}}, "slots_per_host 8"),
        ({"workload": {"jobs": "many"}}, "workload.jobs"),
        ({"colour": "blue"}, "colour"),
        ({"workload": {"shape": {"compute_scale": 2}}}, "workload.shape.compute_scale"),
        ({"workload": {"source": "swim", "trace": "/nonexistent.tsv"}}, "trace"),
        ({"scheduler": {"policy": "nope"}}, "policy: unknown policy 'nope'"),
        ({"scheduler": {"policy_params": {"jobpacker": {"sub_batches": 0}}}}, "policy_params.jobpacker: .*sub_batches"),
        ({"scheduler": {"policy_params": {"fair": {"colour": 1}}}}, "policy_params.fair"),
    ],
)
def test_bad_scenarios_name_the_field(tmp_path, change, field):
    import yaml

    data = yaml.safe_load((REPO / "scenarios" / "quickstart.yaml").read_text())
    for key, value in change.items():
        data[key] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match=field):
        load_scenario(path)


def test_swim_selection_takes_the_first_jobs_that_shuffle_enough(tmp_path):
    trace = tmp_path / "t.tsv"
    trace.write_text("".join(f"job{i}\t{i}\t1\t10\t{i * 100}\t5\n" for i in range(10)))
    rows = read_swim(trace, limit=3, min_shuffle_bytes=450)
    assert [r[0] for r in rows] == ["job5", "job6", "job7"]
    assert [r[0] for r in read_swim(trace, min_shuffle_bytes=450, max_shuffle_bytes=600)] == ["job5", "job6"]
    with pytest.raises(TraceError, match="between 5000"):
        read_swim(trace, min_shuffle_bytes=5000)


def test_several_swim_samples_are_read_one_after_the_other_with_distinct_ids(tmp_path):
    first, second = tmp_path / "a.tsv", tmp_path / "b.tsv"
    first.write_text("".join(f"job{i}\t{i}\t1\t10\t{i * 100}\t5\n" for i in range(3)))
    second.write_text("".join(f"job{i}\t{i}\t1\t10\t{i * 1000}\t5\n" for i in range(3)))
    rows = read_swim_files([first, second], limit=4, min_shuffle_bytes=100)
    assert [r[0] for r in rows] == ["t0.job1", "t0.job2", "t1.job1", "t1.job2"]
    assert [r[3] for r in rows] == [100, 200, 1000, 2000]
    assert [r[0] for r in read_swim_files([first], min_shuffle_bytes=100)] == ["job1", "job2"]


@pytest.mark.parametrize("variant", ["", "-online", "-mixed"])
def test_geni_scenarios_select_the_papers_jobs_from_the_vendored_trace(variant):
    scenario = load_scenario(REPO / "scenarios" / f"jobpacker-geni{variant}.yaml")  # trace relative to the file
    jobs = build_workload(scenario)
    assert len(jobs) == 200 and all(j.shuffle_bytes >= 0.1e9 * scenario.scale for j in jobs)  # the paper's 200
    shuffle_gb = np.array([j.shuffle_bytes for j in jobs]) / scenario.scale / 1e9
    assert 0.1 <= np.percentile(shuffle_gb, 5) < 0.3 and 1 < np.median(shuffle_gb) < 5
    recurring = sum(j.recurring for j in jobs)
    assert recurring == 200 if variant != "-mixed" else 70 < recurring < 130
    assert (max(j.arrival_s for j in jobs) > 0) == (variant != "")


@pytest.mark.parametrize("variant", ["", "-online", "-mixed"])
def test_geni_scenarios_are_network_bound_on_genis_bytes_and_compute_bound_on_full_scale_ones(variant):
    """The reading the paper's F-EPS supports: with compute on GENI's shrunk bytes the links bound the run."""
    path = REPO / "scenarios" / f"jobpacker-geni{variant}.yaml"
    geni = makespan_lower_bounds(load_scenario(path))
    full = makespan_lower_bounds(load_scenario(path, {"workload.shape.compute_scale": 1.0}))
    network = "network (every fetch remote)"
    assert geni[network] == full[network]
    assert geni[network] > geni["cores"] and full["cores"] > full[network]
    assert full["cores"] > 40 * geni["cores"]  # a hundredth of the bytes; the tasks' overhead stays


def test_the_tetris_suite_draws_the_papers_classes_and_demands():
    shape, host = SuiteShape(block_bytes=100 * MB), HostBandwidth(1600, 1600, 1000)
    jobs = tetris_suite(200, random.Random(3), shape, host, scale=1.0)
    ratios = {round(j.shuffle_bytes / j.input_bytes, 3) for j in jobs}
    assert ratios == {0.2, 2.0, 0.5}  # highly selective, inflating, selective
    assert {j.n_maps for j in jobs} == {shape.maps_large, shape.maps_medium, shape.maps_small}
    for job in jobs:
        assert job.input_bytes == job.n_maps * 100 * MB
        for demand, compute_s in ((job.map_demand, job.map_compute_s), (job.reduce_demand, job.reduce_compute_s)):
            assert demand.memory_mb in (2000, 8000)
            if demand.cores == 1:  # I/O-heavy: a quarter of the host's disk and network, a short compute
                assert compute_s == shape.io_heavy_s and demand.disk_write_mbps == 400
            else:  # CPU-heavy: its bytes spread over its compute
                assert demand.cores == shape.cpu_heavy_cores and compute_s == shape.cpu_heavy_s
                assert demand.disk_write_mbps < 400
        per_map_read_mbps = 100 * MB * 8 / 1e6
        assert job.map_demand.disk_read_mbps in (400, per_map_read_mbps / shape.cpu_heavy_s)


def test_a_suite_task_larger_than_a_host_is_refused_by_field():
    with pytest.raises(SpecError, match="workload.suite.cpu_heavy_cores"):
        load_scenario(REPO / "scenarios" / "tetris.yaml", {"workload.suite": {"cpu_heavy_cores": 64}})


def test_a_cpu_heavy_task_asks_no_more_bandwidth_than_a_host_has():
    shape = SuiteShape(block_bytes=2 * MB, cpu_heavy_s=3)  # 2 MB per map, 4 MB per reducer over 3 s: 10.7 Mb/s
    jobs = tetris_suite(50, random.Random(1), shape, HostBandwidth(16, 16, 10), scale=1.0)
    assert max(j.reduce_demand.net_in_mbps for j in jobs) == 10
    assert all(j.map_demand.disk_read_mbps <= 16 for j in jobs)
