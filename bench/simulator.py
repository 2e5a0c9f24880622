"""Simulator speed at the JobPacker paper's scale: wall time per policy on the batch of 1000 jobs over
20 racks x 30 servers, and events per second. Target: <= 60 s per policy on a 2-core machine.
No root needed:
    .venv/bin/python bench/simulator.py [--jobs 1000] [--policies fair,corral,jobpacker,f-eps]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hybridbed.experiments.comparison import default_setups, setup_scenario
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.experiments.simulated import run_simulation

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "jobpacker-paper-sim.yaml"
TARGET_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--policies", help="comma-separated setups (default: the paper's four)")
    args = parser.parse_args()
    scenario = load_scenario(SCENARIO, {"workload.jobs": args.jobs})
    setups = args.policies.split(",") if args.policies else default_setups(scenario)
    table = Table(
        title=f"simulator speed: {scenario.name}, {args.jobs} jobs, "
        f"{scenario.fabric.racks} x {scenario.fabric.hosts_per_rack} servers"
    )
    for column in (
        "setup",
        "makespan s",
        "wall s",
        "of which planning s",
        f"wall / {TARGET_S:g} s target",
        "events",
        "events / s",
        "flows",
    ):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for setup in setups:
            out = Path(tmp) / setup
            summary = run_simulation(setup_scenario(scenario, setup), out)
            flows = sum(1 for _ in (out / "flows.csv").open()) - 1
            wall, events = summary["wall_s"], summary["events"]
            table.add_row(
                setup,
                f"{summary['makespan_s']:.1f}",
                f"{wall:.1f}",
                f"{summary['planning_wall_s']:.1f}",
                f"{wall / TARGET_S:.2f}",
                str(events),
                f"{events / wall:.0f}",
                str(flows),
            )
            print(json.dumps({"setup": setup, "wall_s": wall, "events": events}), flush=True)
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
