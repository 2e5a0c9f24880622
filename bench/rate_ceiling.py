"""How fast can this machine emulate? The quickstart scenario under JobPacker at rising link rates (host rate
x, OCS 2x, data scaled with the rates so the run stays the same size in time), with and without Open vSwitch's
userspace TSO, each run judged by its own fidelity verdict; the highest rate with an `ok` verdict is this
machine's ceiling for that datapath setting. Also the simulator's makespan at each rate, as the reference, and
the datapath's forwarding thread per run: the CPU it ran on and the time it waited for one (p95 of the monitor's
intervals), and the share of intervals it was runnable (running or waiting) for most of. The runs stay in --out.
Runs the emulation one run at a time, as root (about a minute per run):
    .venv/bin/python bench/rate_ceiling.py [--rates 10,40,100,200] [--tso off,on] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hybridbed.experiments.backends import run_backend
from hybridbed.experiments.run_failed import RunFailed
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.results.fidelity import FORWARDING_RUNNABLE_SHARE

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
BASE_RATE_MBPS = 10.0  # the quickstart's host rate; its scale is for this rate
TSO_SETTINGS = {"off": False, "on": True}


def forwarding_columns(forwarding: dict | None) -> list[str]:
    """The forwarding thread's CPU and wait at p95 of the intervals, and the share of intervals it was runnable
    for more than FORWARDING_RUNNABLE_SHARE of ("-" where it was not watched)."""
    if forwarding is None:
        return ["-", "-", "-"]
    runnable = forwarding.get("runnable_share")
    return [
        f"{forwarding['cpu_share']['p95']:.2f}",
        f"{forwarding['wait_share']['p95']:.2f}",
        "-" if runnable is None else f"{runnable:.3f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="10,40,100,200", help="host rates to try, Mb/s")
    parser.add_argument("--policy", default="jobpacker")
    parser.add_argument("--tso", default="off,on", help="userspace TSO settings to run: off, on or off,on")
    parser.add_argument("--out", type=Path, help="where the runs go (default results/rate-ceiling-<time>)")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    if unknown := [s for s in args.tso.split(",") if s not in TSO_SETTINGS]:
        parser.error(f"--tso: {', '.join(unknown)} is not off or on")
    settings = [TSO_SETTINGS[s] for s in args.tso.split(",")]
    out = args.out or Path("results") / f"rate-ceiling-{time.strftime('%Y%m%d-%H%M%S')}"
    base = load_scenario(QUICKSTART)
    table = Table(title=f"quickstart under {args.policy}: fidelity verdict by host rate ({out})")
    columns = ["host Mb/s", "userspace TSO", "verdict", "makespan s", "simulated s"]
    columns += ["forwarding CPU p95", "its wait p95", f"runnable > {FORWARDING_RUNNABLE_SHARE:g}", "reasons"]
    for column in columns:
        table.add_column(column, justify="right" if column != "reasons" else "left")
    ceilings: dict[bool, float] = {}
    for rate in rates:
        factor = rate / BASE_RATE_MBPS
        overrides = {
            "scheduler.policy": args.policy,
            "fabric.host_rate_mbps": rate,
            "fabric.ocs_rate_mbps": base.fabric.ocs_rate_mbps * factor,
            "scale": base.scale * factor,
        }
        simulated = run_backend(
            load_scenario(QUICKSTART, {**overrides, "backend": "simulation"}), out / f"sim-{rate:g}"
        )
        for tso in settings:
            scenario = load_scenario(QUICKSTART, {**overrides, "fabric.userspace_tso": tso})
            try:
                summary = run_backend(scenario, out / f"emu-{rate:g}-tso-{'on' if tso else 'off'}")
            except RunFailed as err:
                table.add_row(f"{rate:g}", str(tso), "failed", "-", "-", "-", "-", "-", str(err)[:60])
                continue
            fidelity = summary["fidelity"]
            if fidelity["verdict"] == "ok":
                ceilings[tso] = max(ceilings.get(tso, 0.0), rate)
            table.add_row(
                f"{rate:g}",
                str(tso),
                fidelity["verdict"],
                f"{summary['makespan_s']:.1f}",
                f"{simulated['makespan_s']:.1f}",
                *forwarding_columns(fidelity.get("forwarding")),
                "; ".join(fidelity["reasons"]),
            )
    console = Console(width=200)
    console.print(table)
    for tso in settings:
        console.print(f"highest host rate with an ok verdict, userspace TSO {tso}: {ceilings.get(tso, 'none')} Mb/s")


if __name__ == "__main__":
    main()
