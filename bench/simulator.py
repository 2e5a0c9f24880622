"""Simulator speed at the JobPacker paper's scale and beyond: per setup, wall seconds, events per second and
simulated seconds per wall second, with the reference rate computation (progressive filling) run on the
same setup for the wall-time ratio and the check that both give the same makespan and JCTs to the
millisecond (the largest difference, and how many jobs differ). Targets: at most 15 s per setup at paper
scale (20 racks x 30 servers, the 1000 FB-2009 jobs of scenarios/jobpacker-paper-sim-coarse.yaml) and at
most 300 s at 10x (--scale 10: 200 racks x 30 servers, 10,000 synthetic jobs with the paper's shuffle
percentiles, as FB-2009 has only 1165 jobs in the range), on a 2-core machine. The targets are measured on
the coarse task shape: Hadoop's (scenarios/jobpacker-paper-sim.yaml, some 13 M flows at paper scale) would
take hours per setup at 10x, and its reference path hours at 1x.
`--scenario` measures another scenario instead (such as jobpacker-paper-sim.yaml), without the targets.
No root needed:
    .venv/bin/python bench/simulator.py [--scale 1|10] [--jobs N] [--policies fair,corral,jobpacker,f-eps]
                                        [--no-reference] [--scenario SCENARIO.yaml]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from hybridbed.experiments.comparison import default_setups, setup_scenario
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.experiments.simulated import run_simulation
from hybridbed.results.progress import Progress
from hybridbed.simulator.fairshare import RateSolver, progressive_filling_rates

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "jobpacker-paper-sim-coarse.yaml"
TARGET_S = {1: 15.0, 10: 300.0}  # wall seconds per setup (issue: the simulator at paper scale in seconds)
PROGRESS_S = 30.0  # wall seconds between progress lines
JCT_RESOLUTION_S = 1e-3  # jobs.csv gives JCTs to the millisecond
TEN_X = {"fabric.racks": 200, "workload.source": "synthetic", "workload.jobs": 10_000}


def timed_run(scenario, out: Path, rates: RateSolver | None) -> tuple[dict, pd.Series, int]:
    """One simulated run (its progress on stderr every PROGRESS_S): its summary, every job's JCT and the
    number of flows it logged."""
    told = time.monotonic()

    def report(progress: Progress) -> None:
        nonlocal told
        if time.monotonic() - told >= PROGRESS_S:
            told = time.monotonic()
            print(
                f"  {out.name}: {progress.jobs_done}/{progress.jobs_total} jobs, {progress.elapsed_s:.0f} simulated s, "
                f"{progress.running_tasks} tasks running",
                file=sys.stderr,
                flush=True,
            )

    summary = run_simulation(scenario, out, report, rates)
    with (out / "flows.csv").open() as flows:
        logged = sum(1 for _ in flows) - 1  # the header
    return summary, pd.read_csv(out / "jobs.csv").set_index("job_id")["jct_s"], logged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, choices=sorted(TARGET_S), default=1)
    parser.add_argument("--jobs", type=int, help="jobs (default: 1000 at scale 1, 10,000 at scale 10)")
    parser.add_argument("--policies", help="comma-separated setups (default: the paper's four)")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference runs (slow at 10x)")
    parser.add_argument("--scenario", type=Path, default=SCENARIO, help="another scenario (no targets then)")
    args = parser.parse_args()
    overrides = dict(TEN_X) if args.scale == 10 else {}
    if args.jobs:
        overrides["workload.jobs"] = args.jobs
    scenario = load_scenario(args.scenario, overrides)
    setups = args.policies.split(",") if args.policies else default_setups(scenario)
    target = TARGET_S[args.scale] if args.scenario == SCENARIO else None
    table = Table(
        title=f"simulator speed: {scenario.name} x{args.scale}, {scenario.workload.jobs} jobs, "
        f"{scenario.fabric.racks} x {scenario.fabric.hosts_per_rack} servers"
    )
    columns = ["setup", "makespan s", "wall s"] + ([f"wall / {target:g} s"] if target else [])
    columns += ["planning s", "flows", "flows / wall s", "events / s", "sim s / wall s"]
    columns += (
        []
        if args.no_reference
        else ["reference wall s", "speed-up", "max JCT diff ms", "jobs off", "reference makespan s"]
    )
    for column in columns:
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for setup in setups:
            scenario_of_setup = setup_scenario(scenario, setup)
            summary, jcts, flows = timed_run(scenario_of_setup, Path(tmp) / setup, None)
            wall = summary["wall_s"]
            row = [setup, f"{summary['makespan_s']:.3f}", f"{wall:.1f}"] + ([f"{wall / target:.2f}"] if target else [])
            row += [
                f"{summary['planning_wall_s']:.1f}",
                f"{flows:,}",
                f"{flows / wall:,.0f}",
                f"{summary['events'] / wall:.0f}",
                f"{summary['simulated_s'] / wall:.1f}",
            ]
            result = {"setup": setup, "scale": args.scale, "wall_s": wall, "events": summary["events"], "flows": flows}
            if not args.no_reference:
                reference, reference_jcts, _ = timed_run(
                    scenario_of_setup, Path(tmp) / f"{setup}-reference", progressive_filling_rates
                )
                jct_diffs = (jcts - reference_jcts).abs()
                jct_diff_ms = float(jct_diffs.max()) * 1e3
                jobs_off = int((jct_diffs >= JCT_RESOLUTION_S / 2).sum())  # JCTs that differ in the millisecond
                row += [
                    f"{reference['wall_s']:.1f}",
                    f"{reference['wall_s'] / wall:.2f}",
                    f"{jct_diff_ms:.3f}",
                    f"{jobs_off}/{len(jct_diffs)}",
                    f"{reference['makespan_s']:.3f}",
                ]
                result |= {
                    "reference_wall_s": reference["wall_s"],
                    "max_jct_diff_ms": jct_diff_ms,
                    "jobs_off": jobs_off,
                    "reference_makespan_s": reference["makespan_s"],
                }
            table.add_row(*row)
            print(json.dumps(result), flush=True)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
