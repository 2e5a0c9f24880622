"""Simulation against emulation: one small scenario on both backends, the makespan of every setup side
by side. Target: simulated / emulated within 15 % for every setup, and the same ordering of setups.
Runs the emulation, so as root (about 5 minutes for the quickstart scenario):
    .venv/bin/python bench/sim_vs_emu.py [scenario.yaml] [--policies fair,corral,jobpacker,f-eps]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hybridbed.experiments.comparison import compare, default_setups
from hybridbed.experiments.scenarios import load_scenario

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
TARGET = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", nargs="?", type=Path, default=QUICKSTART)
    parser.add_argument("--policies", help="comma-separated setups (default: the scenario's comparison setups)")
    args = parser.parse_args()
    setups = args.policies.split(",") if args.policies else default_setups(load_scenario(args.scenario))
    tables = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("simulation", "emulation"):
            scenario = load_scenario(args.scenario, {"backend": backend})
            tables[backend] = compare(scenario, setups, Path(tmp) / backend).set_index("setup")
    sim, emu = tables["simulation"], tables["emulation"]
    table = Table(title=f"{args.scenario.stem}: simulated vs emulated makespan")
    for column in (
        "setup",
        "emulated s",
        "simulated s",
        "simulated / emulated",
        f"within {TARGET:.0%}",
        "shuffle OCS share emu",
        "shuffle OCS share sim",
    ):
        table.add_column(column, justify="right")
    for setup in setups:
        ratio = sim.makespan_s[setup] / emu.makespan_s[setup]
        table.add_row(
            setup,
            f"{emu.makespan_s[setup]:.1f}",
            f"{sim.makespan_s[setup]:.1f}",
            f"{ratio:.3f}",
            "yes" if abs(ratio - 1) <= TARGET else "no",
            f"{emu.shuffle_ocs_share[setup]:.2f}",
            f"{sim.shuffle_ocs_share[setup]:.2f}",
        )
    console = Console()
    console.print(table)
    order_emu = list(emu.makespan_s[setups].sort_values().index)
    order_sim = list(sim.makespan_s[setups].sort_values().index)
    console.print(
        f"ordering, fastest first: emulated {' < '.join(order_emu)}; simulated {' < '.join(order_sim)}; "
        f"{'same' if order_emu == order_sim else 'different'}"
    )


if __name__ == "__main__":
    main()
