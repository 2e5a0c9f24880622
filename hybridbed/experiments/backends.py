"""Running a scenario on the backend it names: the Mininet emulation or the flow-level simulator.

Both take the same scenario, drive the same scheduler core and policy objects and write the same
result files (jobs.csv, tasks.csv, flows.csv with each flow's path, ocs_events.csv, plan.csv,
summary.json), so a comparison or a plot reads either. Each raises RunFailed (`run_failed.py`) when its
run ends without finishing the workload.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hybridbed.config.scenario import Scenario
from hybridbed.results.progress import Progress


def run_backend(scenario: Scenario, out_dir: Path, on_progress: Callable[[Progress], None] | None = None) -> dict:
    """Run the scenario's workload under its policy into out_dir; returns summary.json's content.
    Raises RunFailed (the results written so far stay in out_dir)."""
    if scenario.backend == "simulation":
        from hybridbed.experiments.simulated import run_simulation

        return run_simulation(scenario, out_dir, on_progress)
    from hybridbed.experiments.emulated import run_scenario  # Mininet is imported only for emulation

    return run_scenario(scenario, out_dir, on_progress)
