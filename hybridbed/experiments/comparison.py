"""Comparing scheduling setups on one workload: every setup runs the same scenario (same jobs, same
seed), one after another or, simulated, side by side on a process pool; one table and one set of plots come
out.

A setup is a registered policy on the scenario's network, or `f-eps`: Fair on the EPS-only variant
with uplinks at the OCS rate (the JobPacker paper's F-EPS baseline). Fair on the hybrid network with
the scenario's OCS settings is the paper's F-Hybrid. Makespans and median JCTs are also given relative to
the scenario's `compare_baseline` (default fair, F-Hybrid; BFS, Tez's order, for the DAGPS scenarios).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from hybridbed.config.scenario import F_EPS, Scenario
from hybridbed.experiments.backends import run_to_summary
from hybridbed.experiments.process_pool import POOL_WORKER_LOST, WorkerLost, as_runs_end, check_workers, process_pool
from hybridbed.experiments.scenarios import available_setups
from hybridbed.results.comparison_table import write_comparison_table
from hybridbed.results.plots import plot_comparison
from hybridbed.results.progress import Progress, read_progress, write_progress
from hybridbed.results.timeline_plots import plot_comparison_timelines

F_EPS_POLICY = "fair"
PAPER_SETUPS = ("fair", "corral", "jobpacker", F_EPS)
# told each setup's progress as its run goes, and None when its run has ended
OnProgress = Callable[[str, Progress | None], None]
PROGRESS_POLL_S = 0.5  # how often a comparison on a process pool reads its runs' progress
RELATIVE = {"makespan_vs_baseline": "makespan_s", "jct_median_vs_baseline": "jct_median_s"}
COLUMNS = [
    "setup",
    "status",
    "makespan_s",
    "makespan_vs_baseline",
    "jct_mean_s",
    "jct_median_s",
    "jct_median_vs_baseline",
    "jct_p5_s",
    "jct_p95_s",
    "jct_median_recurring_s",
    "jct_median_adhoc_s",
    "plan_makespan_s",
    "plan_jct_median_s",
    "shuffle_ocs_share",
    "all_traffic_ocs_share",
    "cross_rack_shuffle_bytes",
    "intra_rack_shuffle_bytes",
    "cross_rack_input_bytes",
    "elephant_aggregates",
    "reconfigurations",
    "elephant_waits",
    "elephant_wait_median_s",
    "elephant_wait_p95_s",
    "elephant_wait_max_s",
    "shuffle_read_timeouts",
    "preemptions",
    "share_changes",
    "disorders",
    "job_wait_mean_s",
    "plan_wait_mean_s",
    "deadlines_met",
    "deadline_throughput_per_min",
    "cores_allocated_mean",
    "jobs_done",
    "fidelity",
    "fidelity_reasons",
    "tcp_timer_silence_share",
]


def default_setups(scenario: Scenario) -> list[str]:
    """The scenario's `compare` list, else the JobPacker paper's four setups whose policies are registered."""
    return scenario.compare or [s for s in PAPER_SETUPS if s in available_setups()]


def setup_scenario(scenario: Scenario, setup: str) -> Scenario:
    """The scenario as this setup runs it."""
    data = scenario.model_dump()
    data["scheduler"]["policy"] = F_EPS_POLICY if setup == F_EPS else setup
    if setup == F_EPS:
        data["fabric"]["variant"] = "f-eps"
    return Scenario.model_validate(data)


def _progress_of(setup: str, on_progress: OnProgress | None) -> Callable[[Progress], None] | None:
    """One setup's progress, told with the setup's name."""
    if on_progress is None:
        return None
    return lambda progress: on_progress(setup, progress)


def result_row(setup: str, summary: dict) -> dict:
    """A run's row of a comparison: its setup and summary.json's measures, the fidelity verdict flattened to its
    verdict and reasons, and a captured run's share of connection time spent waiting for TCP's retransmission
    timer (the relative columns are added over the whole table by `add_relative_columns`)."""
    fidelity = summary.get("fidelity") or {}
    flat = {
        **summary,
        "fidelity": fidelity.get("verdict"),
        "fidelity_reasons": "; ".join(fidelity.get("reasons", [])),
        "tcp_timer_silence_share": (fidelity.get("tcp_timer_stalls") or {}).get("timer_silence_share"),
    }
    return {"setup": setup, **{k: flat.get(k) for k in COLUMNS[1:] if k not in RELATIVE}}


def add_relative_columns(table: pd.DataFrame, baseline: str, group: list[str] | None = None) -> pd.DataFrame:
    """The table with makespan and median JCT over the baseline setup's, within each group of rows that share
    the `group` columns (a sweep point's fields and seed; the whole table when None); empty where the group has
    no baseline row or its measure is missing or zero."""
    keys = group or []
    measures = list(RELATIVE.values())
    base = table.loc[table.setup == baseline, keys + measures].drop_duplicates(subset=keys or None)
    base = base.rename(columns={m: f"{m}_of_baseline" for m in measures})
    if keys:
        joined = table.merge(base, on=keys, how="left")
    else:
        joined = table.assign(
            **{f"{m}_of_baseline": base[f"{m}_of_baseline"].iloc[0] if len(base) else None for m in measures}
        )
    result = table.copy()
    for column, measure in RELATIVE.items():
        denominator = pd.to_numeric(joined[f"{measure}_of_baseline"], errors="coerce").to_numpy()
        numerator = pd.to_numeric(table[measure], errors="coerce").to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = numerator / denominator
        result[column] = np.where(np.isfinite(ratio) & (denominator != 0), ratio, np.nan)
    return result


def compare(
    scenario: Scenario,
    setups: list[str],
    out_dir: Path,
    on_progress: OnProgress | None = None,
    workers: int = 1,
) -> pd.DataFrame:
    """Run every setup into out_dir/<setup>, one after another or, simulated, `workers` at a time on a process
    pool; write comparison.csv (a row per setup), comparison_table.csv and .md (a row per measure), the plots and
    timelines.png (the setups' timelines side by side); return comparison.csv's table.
    A setup that fails is recorded as failed and the others still run."""
    check_workers(workers, scenario.backend)
    out_dir.mkdir(parents=True, exist_ok=False)
    if workers > 1 and len(setups) > 1:
        summaries = dict(_run_on_pool(scenario, setups, out_dir, on_progress, workers))
    else:
        summaries = dict(_run_one_by_one(scenario, setups, out_dir, on_progress))
    rows = [result_row(setup, summaries[setup]) for setup in setups]
    jcts = {s: pd.read_csv(out_dir / s / "jobs.csv")["jct_s"] for s in setups if (out_dir / s / "jobs.csv").exists()}
    table = add_relative_columns(pd.DataFrame(rows), scenario.compare_baseline)[COLUMNS]
    table.to_csv(out_dir / "comparison.csv", index=False)
    write_comparison_table(table, scenario.compare_baseline, out_dir)
    plot_comparison(table, jcts, out_dir)
    plot_comparison_timelines(out_dir, setups)
    return table


def _run_one_by_one(
    scenario: Scenario, setups: list[str], out_dir: Path, on_progress: OnProgress | None
) -> Iterator[tuple[str, dict]]:
    """Each setup's summary, the runs one after another in this process."""
    for setup in setups:
        summary = run_to_summary(setup_scenario(scenario, setup), out_dir / setup, _progress_of(setup, on_progress))
        if on_progress:
            on_progress(setup, None)
        yield setup, summary


def _run_in_worker(scenario: Scenario, run_dir: Path) -> dict:
    """`run_to_summary` in a pool's process, telling its progress through run_dir/progress.json."""
    return run_to_summary(scenario, run_dir, lambda progress: write_progress(run_dir, progress))


def _progress_reader(out_dir: Path, on_progress: OnProgress | None) -> Callable[[Collection[str]], None] | None:
    """Tells `on_progress` what the setups under way last wrote to their progress.json; None (nothing to poll)
    when nobody asked for progress."""
    if on_progress is None:
        return None

    def tell_progress(setups_under_way: Collection[str]) -> None:
        for setup in setups_under_way:
            if (progress := read_progress(out_dir / setup)) is not None:
                on_progress(setup, progress)

    return tell_progress


def _run_on_pool(
    scenario: Scenario,
    setups: list[str],
    out_dir: Path,
    on_progress: OnProgress | None,
    workers: int,
) -> Iterator[tuple[str, dict]]:
    """Each setup's summary as its run ends, the runs `workers` at a time; their progress read from their
    progress.json meanwhile. A worker process that dies fails its setup."""
    with process_pool(min(workers, len(setups))) as pool:
        futures = {
            pool.submit(_run_in_worker, setup_scenario(scenario, setup), out_dir / setup): setup for setup in setups
        }
        for setup, summary in as_runs_end(
            futures, POOL_WORKER_LOST, _progress_reader(out_dir, on_progress), PROGRESS_POLL_S
        ):
            if on_progress:
                on_progress(setup, None)
            yield setup, {"status": summary.status} if isinstance(summary, WorkerLost) else summary
