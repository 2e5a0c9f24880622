"""How comparison setups map onto scenarios, and the comparison plots."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from hybridbed.cli import _print_comparison
from hybridbed.config.validation import SpecError
from hybridbed.experiments.comparison import COLUMNS, default_setups, result_row, setup_scenario
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.results.comparison_table import (
    comparison_json,
    comparison_table,
    legend,
    ranking,
    ranking_text,
    same_ranking,
    write_comparison_table,
)
from hybridbed.results.plots import plot_comparison
from hybridbed.workloads.build import build_workload

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
PAPER_SCALE = QUICKSTART.parent / "jobpacker-paper-sim-coarse.yaml"


def test_f_eps_is_fair_on_the_eps_only_variant_at_the_ocs_rate():
    scenario = load_scenario(QUICKSTART)
    f_eps = setup_scenario(scenario, "f-eps")
    assert f_eps.scheduler.policy == "fair"
    assert f_eps.fabric.variant == "f-eps" and not f_eps.fabric.has_ocs
    assert f_eps.fabric.eps_uplink_mbps == scenario.fabric.ocs_rate_mbps
    fifo = setup_scenario(scenario, "fifo")
    assert fifo.scheduler.policy == "fifo" and fifo.fabric == scenario.fabric
    assert build_workload(fifo) == build_workload(scenario)  # same jobs for every setup


def test_default_setups_are_the_papers_unless_the_scenario_names_its_own():
    setups = default_setups(load_scenario(QUICKSTART))
    assert setups[0] == "fair" and setups[-1] == "f-eps"
    assert set(setups) <= {"fair", "corral", "jobpacker", "f-eps"}
    assert default_setups(load_scenario(QUICKSTART, {"compare": ["tetris", "drf"]})) == ["tetris", "drf"]


def test_an_unknown_comparison_setup_is_refused_by_name():
    with pytest.raises(SpecError, match="compare: unknown setup magic"):
        load_scenario(QUICKSTART, {"compare": ["fair", "magic"]})
    with pytest.raises(SpecError, match="compare_baseline: unknown setup tez"):
        load_scenario(QUICKSTART, {"compare_baseline": "tez"})


def test_plots_are_written(tmp_path):
    table = pd.DataFrame(
        [
            {"setup": "fair", "makespan_s": 10.0, "shuffle_ocs_share": 0.4},
            {"setup": "f-eps", "makespan_s": 8.0, "shuffle_ocs_share": None},
        ]
    )
    plot_comparison(table, {"fair": pd.Series([1.0, 3.0, 2.0]), "f-eps": pd.Series([1.0, 2.0])}, tmp_path)
    for name in ("makespan.png", "jct_cdf.png", "ocs_share.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_simulated_comparison_reads_back_as_dataframes(tmp_path):
    from hybridbed.experiments.comparison import compare
    from hybridbed.results.load import load

    scenario = load_scenario(QUICKSTART, {"backend": "simulation", "workload.jobs": 4})
    table = compare(scenario, ["fair", "jobpacker"], tmp_path / "cmp")
    for setup in ("fair", "jobpacker"):
        run = load(tmp_path / "cmp" / setup)
        assert run.summary["status"] == "done" and len(run.jobs) == 4
        assert set(run.tasks["job_id"]) == set(run.jobs["job_id"])
        assert run.summary["makespan_s"] == pytest.approx(run.jobs["finish_s"].max())
        assert float(table.loc[table.setup == setup, "makespan_s"].iloc[0]) == pytest.approx(run.summary["makespan_s"])
    assert len(load(tmp_path / "cmp" / "jobpacker").ocs_events) >= 1  # its circuits were reconfigured
    planned = load(tmp_path / "cmp" / "jobpacker")  # JobPacker's plan beside its run; Fair has none
    assert planned.summary["plan_makespan_s"] == pytest.approx(
        planned.plan[["map_end_s", "reduce_end_s"]].max(axis=1).max()
    )
    assert planned.summary["plan_wait_mean_s"] >= 0
    assert table.set_index("setup")["plan_jct_median_s"].isna().tolist() == [True, False]
    for setup in ("fair", "jobpacker"):  # the shuffle's OCS share is read off its own flows, inputs apart
        run = load(tmp_path / "cmp" / setup)
        cross = run.flows[(run.flows.kind == "shuffle") & (run.flows.src_rack != run.flows.dst_rack)]
        assert run.summary["shuffle_ocs_share"] == pytest.approx(cross.ocs_bytes.sum() / cross.bytes.sum())
        assert 0 <= run.summary["shuffle_ocs_share"] <= 1
        assert set(run.flows.job_id) <= set(run.jobs.job_id)
        assert {"shuffle_ocs_share", "cross_rack_input_bytes", "elephant_aggregates"} <= set(table.columns)
    with pytest.raises(FileNotFoundError, match="summary.json"):
        load(tmp_path / "cmp")
    # only some tables, some of them in part: what a paper-scale run's millions of flows need
    run = load(tmp_path / "cmp" / "fair", {"flows": ["task_id", "end_s"], "jobs": None})
    assert list(run.flows.columns) == ["task_id", "end_s"] and len(run.flows) == len(
        load(tmp_path / "cmp" / "fair").flows
    )
    assert "recurring" in run.jobs.columns
    with pytest.raises(AttributeError, match="'tasks' was not read; read: jobs, flows"):
        _ = run.tasks
    with pytest.raises(ValueError, match="no table plans"):
        load(tmp_path / "cmp" / "fair", {"plans": None})


def test_a_simulated_comparison_on_a_process_pool_gives_the_same_table_as_one_after_another(tmp_path):
    from hybridbed.experiments.comparison import compare

    scenario = load_scenario(QUICKSTART, {"backend": "simulation", "workload.jobs": 6})
    setups = ["fair", "corral", "jobpacker", "f-eps"]
    told: list[tuple[str, object]] = []
    in_turn = compare(scenario, setups, tmp_path / "in-turn")
    pooled = compare(scenario, setups, tmp_path / "pool", lambda setup, p: told.append((setup, p)), workers=2)
    pd.testing.assert_frame_equal(pooled, in_turn)
    assert list(pooled.setup) == setups and (pooled.status == "done").all()
    assert len(set(pooled.makespan_s)) > 1  # the setups differ: the rows are not one run's repeated
    assert sorted(setup for setup, p in told if p is None) == sorted(setups)  # each run's end told once
    assert all(p.jobs_total == 6 for _, p in told if p is not None)
    for setup in setups:
        assert json.loads((tmp_path / "pool" / setup / "summary.json").read_text())["status"] == "done"


def test_an_interrupted_comparison_on_a_process_pool_stops_its_runs_and_keeps_what_they_wrote(tmp_path):
    import multiprocessing

    from hybridbed.experiments.comparison import compare

    scenario = load_scenario(PAPER_SCALE, {"backend": "simulation", "workload.jobs": 150})
    setups = ["fair", "corral", "jobpacker", "f-eps"]

    def interrupt(setup: str, progress: object) -> None:
        if progress is not None:  # a run under way: as if Ctrl-C came now
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compare(scenario, setups, tmp_path / "cmp", interrupt, workers=2)
    statuses = {
        run.name: json.loads((run / "summary.json").read_text())["status"] for run in (tmp_path / "cmp").iterdir()
    }
    assert "interrupted" in statuses.values() and set(statuses.values()) <= {"done", "interrupted"}
    assert len(statuses) < len(setups)  # the runs not started did not start
    assert not multiprocessing.active_children()  # every worker has ended


def test_an_emulated_comparison_runs_one_setup_at_a_time(tmp_path):
    from hybridbed.experiments.comparison import compare

    with pytest.raises(SpecError, match="--workers: emulated runs go one at a time"):
        compare(load_scenario(QUICKSTART), ["fair", "jobpacker"], tmp_path / "cmp", workers=2)
    with pytest.raises(SpecError, match="--workers: at least 1"):
        compare(load_scenario(QUICKSTART, {"backend": "simulation"}), ["fair"], tmp_path / "cmp", workers=0)
    assert not (tmp_path / "cmp").exists()


def wide_table() -> pd.DataFrame:
    """comparison.csv's shape: the papers' four setups, one of which failed before it measured anything."""
    rows = [
        {
            "setup": "fair",
            "status": "done",
            "makespan_s": 50.0,
            "shuffle_ocs_share": 0.5,
            "cross_rack_shuffle_bytes": 2.2e7,
        },
        {
            "setup": "corral",
            "status": "done",
            "makespan_s": 40.0,
            "shuffle_ocs_share": 0.25,
            "cross_rack_shuffle_bytes": 8e6,
        },
        {
            "setup": "jobpacker",
            "status": "done",
            "makespan_s": 35.0,
            "shuffle_ocs_share": 0.75,
            "cross_rack_shuffle_bytes": 1.5e9,
        },
        {"setup": "f-eps", "status": "failed: the scheduler exited with status -9; see scheduler.log"},
    ]
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["preemptions"] = 0  # a measure nobody has anything for stays out
    return table


def test_the_comparison_table_has_a_row_per_measure_with_units_and_ratios():
    view = comparison_table(wide_table(), baseline="fair")
    assert list(view.columns) == ["fair", "corral", "jobpacker", "f-eps"]
    assert view.loc["makespan s (x base)"].tolist() == ["50.0 x1.00", "40.0 x0.80", "35.0 x0.70", "-"]
    assert view.loc["x-rack shuffle on OCS", "jobpacker"] == "0.75"
    assert view.loc["x-rack shuffle GB"].tolist() == ["0.022", "0.008", "1.5", "-"]  # one unit per row
    assert "preemptions" not in view.index and view.loc["status", "f-eps"].startswith("failed: the scheduler")


def test_the_legend_explains_the_terms_of_the_rows_shown_and_no_others():
    table = wide_table()
    told = legend(comparison_table(table, baseline="fair"), "fair")
    assert "ratio to the baseline setup (fair)" in told and "x-rack: between racks" in told
    assert "elephant wait" not in told and "fetch read timeouts" not in told  # no setup has those rows
    table["elephant_wait_max_s"] = [3.0, None, 40.0, None]
    assert "elephant wait: " in legend(comparison_table(table, baseline="fair"), "fair")


def test_the_printed_comparison_fits_80_columns_with_every_name_whole(tmp_path):
    view = write_comparison_table(wide_table(), "fair", tmp_path)
    console = Console(width=80, record=True, file=io.StringIO())
    _print_comparison(wide_table(), "fair", "t", console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for name in [*view.columns, *view.index]:
        assert name in text, name
    markdown = (tmp_path / "comparison_table.md").read_text()
    assert "| makespan s (x base)" in markdown and "ratio to the baseline setup (fair)" in markdown
    assert pd.read_csv(tmp_path / "comparison_table.csv", index_col="measure").shape == view.shape


def test_the_json_comparison_is_strict_json_with_null_for_what_a_setup_lacks():
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    rows = json.loads(comparison_json(wide_table()), parse_constant=refuse)
    assert list(rows) == ["fair", "corral", "jobpacker", "f-eps"]
    assert rows["f-eps"]["makespan_s"] is None and rows["f-eps"]["status"].startswith("failed")
    assert rows["jobpacker"]["makespan_s"] == 35.0 and rows["fair"]["preemptions"] == 0  # numbers stay numbers


def test_a_captured_run_brings_its_timer_silence_into_the_comparison_and_its_legend():
    stalls = {"connections": 12, "timer_silence_share": 0.19}
    captured = result_row("fair", {"status": "done", "fidelity": {"verdict": "ok", "tcp_timer_stalls": stalls}})
    plain = result_row("corral", {"status": "done", "fidelity": {"verdict": "ok"}})
    assert captured["tcp_timer_silence_share"] == 0.19 and plain["tcp_timer_silence_share"] is None
    table = pd.DataFrame([captured, plain], columns=COLUMNS)
    view = comparison_table(table, baseline="fair")
    assert view.loc["TCP timer silence share"].tolist() == ["0.19", "-"]
    assert "waiting for a retransmission timer" in legend(view, "fair")
    assert "TCP timer silence" not in legend(comparison_table(wide_table(), baseline="fair"), "fair")


def test_setups_within_the_tie_fraction_rank_together_and_a_tie_agrees_with_either_order():
    emulated = ranking(pd.Series({"fair": 600.0, "corral": 651.0, "jobpacker": 520.0, "f-eps": 555.0}))
    assert ranking_text(emulated) == "jobpacker < f-eps < fair < corral"
    online = ranking(pd.Series({"fair": 1800.4, "corral": 1800.2, "jobpacker": 1800.3, "f-eps": 1850.0}))
    assert online == [["corral", "jobpacker", "fair"], ["f-eps"]]
    assert same_ranking(online, ranking(pd.Series({"fair": 1.0, "corral": 3.0, "jobpacker": 2.0, "f-eps": 4.0})))
    assert not same_ranking(online, ranking(pd.Series({"fair": 5.0, "corral": 3.0, "jobpacker": 2.0, "f-eps": 4.0})))
    # a group is measured from its fastest: a chain of small steps does not make one long tie
    chain = ranking(pd.Series({"a": 100.0, "b": 101.5, "c": 103.0}))
    assert chain == [["a", "b"], ["c"]]
