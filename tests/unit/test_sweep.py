"""Parameter sweeps: the grid's checks, its points, a table per run on a process pool and on Dask, resuming."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from hybridbed.cli import main
from hybridbed.config.scenario import read_scenario
from hybridbed.config.validation import SpecError
from hybridbed.experiments.sweep import SweepGrid, plan_sweep, point_scenario, read_grid, run_sweep

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
INTERVALS = [0.5, 1.0, 2.0]
# 3 intervals x 2 setups x 2 seeds: the 12-point grid of the acceptance
GRID = SweepGrid(fields={"ocs.reconfig_interval_s": INTERVALS}, setups=["fair", "jobpacker"], seeds=[7, 8])
MEASURED = ["makespan_s", "jct_median_s", "shuffle_ocs_share", "reconfigurations", "jobs_done"]


def quickstart_data(**overrides: object) -> dict:
    return read_scenario(QUICKSTART, {"backend": "simulation", **overrides})


def test_points_are_setups_times_seeds_times_field_values_each_run_as_its_values_say():
    sweep = plan_sweep(quickstart_data(), GRID, None, None)
    assert len(sweep.points) == 12
    assert len({p.name for p in sweep.points}) == 12
    point = next(p for p in sweep.points if p.setup == "jobpacker" and p.seed == 8 and p.values[0][1] == 2.0)
    scenario = point_scenario(sweep.scenario_data, point)
    assert scenario.ocs.reconfig_interval_s == 2.0 and scenario.seed == 8
    assert scenario.scheduler.policy == "jobpacker"
    assert sweep.scenario_data["ocs"]["reconfig_interval_s"] == 1.0  # the base scenario is left as it was
    again = plan_sweep(quickstart_data(), GRID, ["fair"], [3])
    assert {(p.setup, p.seed) for p in again.points} == {("fair", 3)}  # --policies and --seeds win over the grid


def test_f_eps_and_policy_parameters_are_swept_like_any_field():
    grid = SweepGrid(fields={"scheduler.policy_params.jobpacker.sub_batches": [1, 5]}, setups=["jobpacker", "f-eps"])
    sweep = plan_sweep(quickstart_data(), grid, None, None)
    jobpacker = [point_scenario(sweep.scenario_data, p) for p in sweep.points if p.setup == "jobpacker"]
    assert [s.scheduler.policy_params["jobpacker"]["sub_batches"] for s in jobpacker] == [1, 5]
    f_eps = [point_scenario(sweep.scenario_data, p) for p in sweep.points if p.setup == "f-eps"]
    assert all(s.fabric.variant == "f-eps" and s.scheduler.policy == "fair" for s in f_eps)


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"fields": {"seed": [1, 2]}}, "seed is not swept as a field; give it as seeds"),
        ({"fields": {"scheduler.policy": ["fair"]}}, "scheduler.policy is not swept"),
        ({"fields": {"ocs.reconfig_interval_s": []}}, "ocs.reconfig_interval_s: give at least one value"),
        ({"fields": {"ocs.reconfig_interval_s": [1, 1]}}, "a value is given twice"),
        ({"plot": ["speed"]}, "unknown measure speed"),
        ({"seeds": []}, "seeds"),
        ({"repeat": 3}, "repeat"),
    ],
)
def test_a_bad_grid_is_refused_naming_the_field(tmp_path, grid, message):
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(grid))
    with pytest.raises(SpecError, match=message):
        read_grid(path)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"ocs.reconfig_interval_s": [1, -2]}, "reconfig_interval_s"),
        ({"ocs.reconfig_intervall_s": [1]}, "reconfig_intervall_s"),
        ({"scheduler.policy_params.jobpacker.sub_batchez": [2]}, "sub_batchez"),
    ],
)
def test_a_bad_value_or_field_is_refused_before_anything_runs(tmp_path, fields, message):
    grid = tmp_path / "grid.yaml"
    grid.write_text(json.dumps({"fields": fields, "setups": ["jobpacker"]}))
    out = tmp_path / "out"
    code = main(["sweep", str(QUICKSTART), "--grid", str(grid), "--backend", "simulation", "--out", str(out)])
    assert code == 2
    assert not out.exists()
    with pytest.raises(SpecError, match=message):
        plan_sweep(quickstart_data(), SweepGrid(fields=fields, setups=["jobpacker"]), None, None)


def test_an_emulated_sweep_runs_one_point_at_a_time(tmp_path):
    sweep = plan_sweep(read_scenario(QUICKSTART), SweepGrid(fields={"ocs.reconfig_interval_s": [1]}), None, None)
    with pytest.raises(SpecError, match="one at a time"):
        run_sweep(sweep, tmp_path / "out", workers=2)
    assert not (tmp_path / "out").exists()


def test_capture_packets_is_set_on_every_point(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(json.dumps({"fields": {"ocs.reconfig_interval_s": [1, 2]}, "setups": ["fair", "jobpacker"]}))
    data = read_scenario(QUICKSTART, {"capture_packets": True})  # what --capture-packets gives `sweep`
    sweep = plan_sweep(data, read_grid(grid), None, None)
    assert len(sweep.points) == 4
    assert all(point_scenario(sweep.scenario_data, point).capture_packets for point in sweep.points)


def comparable(table: pd.DataFrame) -> pd.DataFrame:
    return table[["point", "setup", "seed", "ocs.reconfig_interval_s", "status", *MEASURED]].reset_index(drop=True)


def test_a_twelve_point_grid_gives_the_same_table_on_a_process_pool_and_on_dask(tmp_path):
    distributed = pytest.importorskip("distributed")
    sweep = plan_sweep(quickstart_data(), GRID, None, None)
    pool = run_sweep(sweep, tmp_path / "pool", workers=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        on_dask = run_sweep(sweep, tmp_path / "dask", dask=cluster.scheduler_address)
    assert len(pool) == 12 and (pool.status == "done").all()
    pd.testing.assert_frame_equal(comparable(pool), comparable(on_dask))
    pd.testing.assert_frame_equal(comparable(pool), comparable(pd.read_csv(tmp_path / "pool" / "sweep.csv")))
    fair = pool[pool.setup == "fair"]
    assert (fair.makespan_vs_baseline == 1.0).all()  # each point against fair at its own interval and seed
    jobpacker = pool[pool.setup == "jobpacker"].set_index(["seed", "ocs.reconfig_interval_s"])
    fair_at = fair.set_index(["seed", "ocs.reconfig_interval_s"])
    assert (jobpacker.makespan_vs_baseline - jobpacker.makespan_s / fair_at.makespan_s).abs().max() < 1e-12
    assert len(set(pool.makespan_s)) > 2  # the field and the seed change what runs
    assert (tmp_path / "pool" / "sweep-ocs.reconfig_interval_s.png").read_bytes()[:4] == b"\x89PNG"


def test_a_rerun_skips_finished_points_and_reruns_unfinished_ones_keeping_their_files(tmp_path):
    grid = SweepGrid(fields={"ocs.reconfig_interval_s": [0.5, 2.0]}, setups=["fair"])
    sweep = plan_sweep(quickstart_data(), grid, None, None)
    out = tmp_path / "out"
    first = run_sweep(sweep, out, workers=1)
    unfinished, finished = sweep.points
    (out / "runs" / unfinished.name / "summary.json").unlink()  # as if the sweep had been stopped mid-run
    finished_mtime = (out / "runs" / finished.name / "summary.json").stat().st_mtime_ns
    told = []
    second = run_sweep(sweep, out, workers=1, on_point=lambda done, total, point: told.append((done, point)))
    assert told == [(1, None), (2, unfinished)]  # one point already done, one run
    assert (out / "runs" / finished.name / "summary.json").stat().st_mtime_ns == finished_mtime
    assert (out / "incomplete" / f"{unfinished.name}-1" / "jobs.csv").exists()
    pd.testing.assert_frame_equal(comparable(first), comparable(second))


def test_an_out_dir_of_another_scenario_or_of_something_else_is_refused(tmp_path):
    grid = SweepGrid(fields={"ocs.reconfig_interval_s": [1.0]}, setups=["fair"])
    out = tmp_path / "out"
    run_sweep(plan_sweep(quickstart_data(), grid, None, None), out)
    other = plan_sweep(quickstart_data(**{"workload.jobs": 4}), grid, None, None)
    with pytest.raises(SpecError, match="another scenario"):
        run_sweep(other, out)
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(SpecError, match="holds no sweep"):
        run_sweep(other, stranger)
    assert sorted(p.name for p in stranger.iterdir()) == ["notes.txt"]


def test_the_command_prints_the_table_as_json_and_resumes_from_its_directory(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("fields:\n  ocs.reconfig_interval_s: [0.5, 2.0]\nsetups: [fair]\n")
    args = ["sweep", str(QUICKSTART), "--grid", str(grid), "--backend", "simulation", "--workers", "1"]
    assert main([*args, "--out", str(tmp_path / "out"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["ocs.reconfig_interval_s"] for r in rows] == [0.5, 2.0]
    assert all(r["status"] == "done" and r["makespan_s"] > 0 for r in rows)
    shutil.rmtree(tmp_path / "out" / "runs" / rows[1]["point"])
    assert main([*args, "--out", str(tmp_path / "out"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == rows


@pytest.mark.parametrize("grid", sorted((QUICKSTART.parents[1] / "sweeps").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_grid_plans_against_the_scenario_its_command_names(grid):
    commands = [line for line in grid.read_text().splitlines() if "hybridbed sweep" in line]
    assert len(commands) == 1, "a grid says how to run it"
    _, _, scenario, flag, named_grid, *options = commands[0].split("#", 1)[1].split()
    assert flag == "--grid" and named_grid == f"sweeps/{grid.name}"
    assert options in ([], ["--backend", "simulation"])  # an emulated scenario's grid says it runs simulated
    sweep = plan_sweep(read_scenario(QUICKSTART.parents[1] / scenario), read_grid(grid), None, None)
    assert len(sweep.points) >= 4
