"""The JobPacker paper's headline numbers beside hybridbed's: JobPacker's makespan and median JCTs against
F-Hybrid's and Corral's, and every setup's shuffle OCS share, from comparisons of the paper's batch, online
and mixed scenarios. Targets (the comparison issue): each change within 10 points of the paper's, and shuffle
OCS shares of at least 0.9 for JobPacker, at most 0.35 for Corral and at most 0.1 for F-Hybrid, in that order.
Beside each change, the change JobPacker's own offline plan predicts (its planned makespan or median JCT against
the other setup's run), so that a gap shows whether it is in the plan or in running it.

Without directories it runs the three scenarios in the simulator: scenarios/jobpacker-paper-sim.yaml, -online
and -mixed (Hadoop's task shape: on a 2-core VM the batch's four setups took 36 minutes, the online and mixed
scenarios' three 17 and 21, so the three scenarios take about 75 minutes), or with --geni jobpacker-geni.yaml, -online and
-mixed, judged against the paper's GENI numbers. Given comparison directories (emulated or simulated) it only
reads them. No root needed:
    .venv/bin/python bench/jobpacker_paper.py [--out DIR]
    .venv/bin/python bench/jobpacker_paper.py [--geni] [--batch DIR] [--online DIR] [--mixed DIR]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from hybridbed.experiments.comparison import compare, default_setups
from hybridbed.experiments.process_pool import default_workers
from hybridbed.experiments.scenarios import load_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
KINDS = ("batch", "online", "mixed")
POINTS = 10.0  # the tolerance: within 10 percentage points of the paper's change
SHARE_BOUNDS = {"jobpacker": (0.9, 1.0), "corral": (0.0, 0.35), "fair": (0.0, 0.1)}  # the issue's, from §5.2.1 Fig. 9


@dataclass(frozen=True)
class Claim:
    """One of the paper's changes of a JobPacker measure against another setup, negative when JobPacker is
    faster; paper values per testbed (simulation, GENI) with the section they come from."""

    kind: str
    measure: str
    against: str
    sim: float
    geni: float
    source: str


CLAIMS = [
    Claim("batch", "makespan_s", "fair", -47, -49, "§5.2.1, Fig. 8"),
    Claim("batch", "makespan_s", "corral", -29, -27, "§5.2.1"),
    Claim("online", "jct_median_s", "fair", -43, -42, "§5.2.2, Fig. 10"),
    Claim("online", "jct_median_s", "corral", -28, -27, "§5.2.2"),
    Claim("mixed", "jct_median_recurring_s", "fair", -40, -39, "§5.3, Fig. 12"),
    Claim("mixed", "jct_median_adhoc_s", "fair", -38, -37, "§5.3, Fig. 13"),
    Claim("mixed", "jct_median_recurring_s", "corral", -24, -26, "§5.3"),
    Claim("mixed", "jct_median_adhoc_s", "corral", -25, -29, "§5.3"),
]
PAPER_SHARES = {"jobpacker": ">0.96", "corral": "<0.23", "fair": "~0.008"}  # §5.2.1, Fig. 9 (all traffic)
NAMES = {"fair": "F-Hybrid", "corral": "Corral", "jobpacker": "JobPacker"}  # the paper's names of the setups
# the plan's prediction of each measure (summary.json's plan_*: over the planned, recurring, jobs)
PLANNED = {
    "makespan_s": "plan_makespan_s",
    "jct_median_s": "plan_jct_median_s",
    "jct_median_recurring_s": "plan_jct_median_s",
}
MEASURES = {
    "makespan_s": "makespan",
    "jct_median_s": "median JCT",
    "jct_median_recurring_s": "median JCT, recurring",
    "jct_median_adhoc_s": "median JCT, ad hoc",
}


def scenario_path(kind: str, geni: bool) -> Path:
    suffix = "" if kind == "batch" else f"-{kind}"
    return SCENARIOS / (f"jobpacker-geni{suffix}.yaml" if geni else f"jobpacker-paper-sim{suffix}.yaml")


def run_comparisons(geni: bool, out: Path) -> dict[str, Path]:
    """The three scenarios' comparisons in the simulator, one after another (each with a run per CPU at once),
    into out/<kind>."""
    dirs = {}
    for kind in KINDS:
        scenario = load_scenario(scenario_path(kind, geni), {"backend": "simulation"})
        compare(scenario, default_setups(scenario), out / kind, workers=default_workers("simulation"))
        dirs[kind] = out / kind
    return dirs


def change_rows(tables: dict[str, pd.DataFrame], geni: bool) -> list[list[str]]:
    """One row per claim whose comparison was given: the paper's change, hybridbed's, and whether they are
    within POINTS of each other; and the change JobPacker's plan predicts ("-": no plan of that measure)."""
    rows = []
    for claim in CLAIMS:
        table = tables.get(claim.kind)
        if table is None:
            continue
        paper = claim.geni if geni else claim.sim
        against = table.at[claim.against, claim.measure]
        ours = 100 * (table.at["jobpacker", claim.measure] / against - 1)
        planned = PLANNED.get(claim.measure)
        plan = 100 * (table.at["jobpacker", planned] / against - 1) if planned in table.columns else np.nan
        rows.append(
            [
                f"{claim.kind}: {MEASURES[claim.measure]} vs {NAMES[claim.against]}",
                f"{paper:+.0f} %",
                f"{ours:+.1f} %",
                f"{ours - paper:+.1f}",
                "yes" if abs(ours - paper) <= POINTS else "no",
                f"{plan:+.1f} %" if np.isfinite(plan) else "-",
                claim.source,
            ]
        )
    return rows


def circuit_shares(table: pd.DataFrame) -> pd.Series:
    """Each setup's shuffle OCS share as the bounds and the order judge it: a setup whose shuffle never
    crossed racks (no share) sent none of it over circuits, 0."""
    return table.shuffle_ocs_share[list(SHARE_BOUNDS)].fillna(0.0)


def share_rows(table: pd.DataFrame) -> list[list[str]]:
    """Every setup's shuffle OCS share against the issue's bound for it."""
    judged = circuit_shares(table)
    rows = []
    for setup, (low, high) in SHARE_BOUNDS.items():
        share = float(table.at[setup, "shuffle_ocs_share"])
        rows.append(
            [
                NAMES[setup],
                PAPER_SHARES[setup],
                "none crossed racks" if np.isnan(share) else f"{share:.3f}",
                f"{low:g}-{high:g}",
                "yes" if low <= judged[setup] <= high else "no",
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--geni", action="store_true", help="the paper's GENI numbers and scenarios")
    for kind in KINDS:
        parser.add_argument(
            f"--{kind}", type=Path, help=f"the {kind} scenario's comparison directory, read instead of run"
        )
    parser.add_argument("--out", type=Path, help="where the runs go (default results/jobpacker-paper-<time>)")
    args = parser.parse_args()
    given = {kind: getattr(args, kind) for kind in KINDS if getattr(args, kind)}
    for kind, directory in given.items():
        if not (directory / "comparison.csv").is_file():
            parser.error(f"--{kind}: {directory} holds no comparison.csv")
    if not given:
        out = args.out or Path("results") / f"jobpacker-paper-{time.strftime('%Y%m%d-%H%M%S')}"
        given = run_comparisons(args.geni, out)
    tables = {kind: pd.read_csv(directory / "comparison.csv").set_index("setup") for kind, directory in given.items()}
    console = Console()
    testbed = "GENI" if args.geni else "simulation"
    changes = Table(title=f"JobPacker's change against the paper's ({testbed}); within {POINTS:g} points")
    changes.add_column("JobPacker's change")  # the one column that wraps in a narrow terminal
    for column in ("paper", "ours", "off", "ok", "plan", "source"):
        changes.add_column(column, no_wrap=True)
    for row in change_rows(tables, args.geni):
        changes.add_row(*row)
    console.print(changes)
    if "batch" in tables:
        shares = Table(title="batch: shuffle OCS share (the paper's: all traffic, §5.2.1 Fig. 9)")
        for column in ("setup", "paper", "ours", "target", "ok"):
            shares.add_column(column, no_wrap=True)
        for row in share_rows(tables["batch"]):
            shares.add_row(*row)
        console.print(shares)
        share = circuit_shares(tables["batch"])
        ordered = bool((share.diff().dropna() < 0).all())
        console.print(
            f"shuffle OCS shares {' > '.join(NAMES[s] for s in SHARE_BOUNDS)}: {'yes' if ordered else 'no'} "
            f"({', '.join(f'{share[s]:.3f}' for s in SHARE_BOUNDS)})"
        )


if __name__ == "__main__":
    main()
