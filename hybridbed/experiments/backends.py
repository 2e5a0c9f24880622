"""Running a scenario on the backend it names: the Mininet emulation or the flow-level simulator.

Both take the same scenario, drive the same scheduler core and policy objects and write the same
result files (jobs.csv, tasks.csv, flows.csv with each flow's path, ocs_events.csv, links.csv, plan.csv,
summary.json), so a comparison or a plot reads either; every run's timeline.png is drawn here. Each raises
RunFailed (`run_failed.py`) when its run ends without finishing the workload.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hybridbed.config.scenario import Scenario
from hybridbed.experiments.run_failed import RunFailed
from hybridbed.results.progress import Progress
from hybridbed.results.timeline_plots import plot_run_timeline


def run_backend(scenario: Scenario, out_dir: Path, on_progress: Callable[[Progress], None] | None = None) -> dict:
    """Run the scenario's workload under its policy into out_dir, and plot its timeline there (timeline.png, also
    for a failed run); returns summary.json's content. Raises RunFailed (the results written so far stay in out_dir)."""
    try:
        summary = _run_on_backend(scenario, out_dir, on_progress)
    except RunFailed:
        if (out_dir / "summary.json").is_file():
            plot_run_timeline(out_dir)
        raise
    plot_run_timeline(out_dir)
    return summary


def run_to_summary(scenario: Scenario, out_dir: Path, on_progress: Callable[[Progress], None] | None = None) -> dict:
    """`run_backend`, where a failed run gives a summary whose status says why (its partial results stay in
    out_dir): for comparisons and sweeps, which go on with their other runs."""
    try:
        return run_backend(scenario, out_dir, on_progress)
    except RunFailed as err:
        return {"status": f"failed: {err}"}


def _run_on_backend(scenario: Scenario, out_dir: Path, on_progress: Callable[[Progress], None] | None) -> dict:
    if scenario.backend == "simulation":
        from hybridbed.experiments.simulated import run_simulation

        return run_simulation(scenario, out_dir, on_progress)
    from hybridbed.experiments.emulated import run_scenario  # Mininet is imported only for emulation

    return run_scenario(scenario, out_dir, on_progress)
