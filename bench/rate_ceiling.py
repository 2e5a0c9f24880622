"""How fast can this machine emulate? The quickstart scenario under JobPacker at rising link rates (host rate
x, OCS 2x, data scaled with the rates so the run stays the same size in time), with and without Open vSwitch's
userspace TSO, each run judged by its own fidelity verdict; the highest rate with an `ok` verdict is this
machine's ceiling for that datapath setting. Also the simulator's makespan at each rate, as the reference.
Runs the emulation one run at a time, as root (about a minute per run):
    .venv/bin/python bench/rate_ceiling.py [--rates 10,40,100,200]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hybridbed.experiments.backends import run_backend
from hybridbed.experiments.run_failed import RunFailed
from hybridbed.experiments.scenarios import load_scenario

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
BASE_RATE_MBPS = 10.0  # the quickstart's host rate; its scale is for this rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="10,40,100,200", help="host rates to try, Mb/s")
    parser.add_argument("--policy", default="jobpacker")
    args = parser.parse_args()
    base = load_scenario(QUICKSTART)
    table = Table(title=f"quickstart under {args.policy}: fidelity verdict by host rate")
    for column in ("host Mb/s", "userspace TSO", "verdict", "makespan s", "simulated s", "reasons"):
        table.add_column(column, justify="right" if column != "reasons" else "left")
    ceilings: dict[bool, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rate in [float(r) for r in args.rates.split(",")]:
            factor = rate / BASE_RATE_MBPS
            overrides = {
                "scheduler.policy": args.policy,
                "fabric.host_rate_mbps": rate,
                "fabric.ocs_rate_mbps": base.fabric.ocs_rate_mbps * factor,
                "scale": base.scale * factor,
            }
            simulated = run_backend(
                load_scenario(QUICKSTART, {**overrides, "backend": "simulation"}), Path(tmp) / f"sim-{rate:g}"
            )
            for tso in (False, True):
                scenario = load_scenario(QUICKSTART, {**overrides, "fabric.userspace_tso": tso})
                try:
                    summary = run_backend(scenario, Path(tmp) / f"emu-{rate:g}-{tso}")
                except RunFailed as err:
                    table.add_row(f"{rate:g}", str(tso), "failed", "-", "-", str(err)[:60])
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
                    "; ".join(fidelity["reasons"]),
                )
    console = Console()
    console.print(table)
    for tso in (False, True):
        console.print(f"highest host rate with an ok verdict, userspace TSO {tso}: {ceilings.get(tso, 'none')} Mb/s")


if __name__ == "__main__":
    main()
