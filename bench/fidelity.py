"""Fidelity benchmark: how faithfully this machine carries the emulated hybrid DCN.

Prints, measured side by side in one run:
  - goodput / configured rate over EPS and OCS paths, one flow and all hosts at once (4x2 fabric, defaults);
  - OCS delivery gap / configured reconfiguration delay for 10, 50 and 100 ms (several reconfigurations each);
  - bring-up and tear-down time for 4x2 and 10x2 fabrics;
  - CPU left idle while the fabric is loaded.

Targets on a 2-core machine: single-flow ratio >= 0.92, all-to-all >= 0.90, dark-time ratio in
[1.0, 1.15] at 50 and 100 ms, 10x2 bring-up <= 15 s.  Run as root:  .venv/bin/python bench/fidelity.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from rich.console import Console
from rich.table import Table

from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.testbed import probes
from hybridbed.testbed.fidelity import run_check
from hybridbed.testbed.network import HybridNetwork


def dark_time_ratios(delay_ms: float, repeats: int) -> list[float]:
    """Measured OCS delivery gap / configured delay, once per reconfiguration, on one 3x1 fabric."""
    with HybridNetwork(FabricSpec(racks=3, hosts_per_rack=1), OcsSpec(reconfig_delay_ms=delay_ms)) as net:
        return [probes.reconfiguration_gap(net)[0] * 1000 / delay_ms for _ in range(repeats)]


def lifecycle_seconds(racks: int, hosts: int) -> tuple[float, float]:
    """(bring-up, tear-down) seconds of one fabric with default rates."""
    net = HybridNetwork(FabricSpec(racks=racks, hosts_per_rack=hosts), OcsSpec())
    net.start()
    t0 = time.monotonic()
    net.stop()
    return net.bringup_s, time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="reconfigurations measured per delay")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    console = Console(stderr=True)

    rows: dict[str, float | bool | str] = {}
    with console.status("goodput, steering and CPU headroom on a 4x2 fabric ..."):
        report = run_check(FabricSpec(racks=4, hosts_per_rack=2), reconfig_delay_ms=50.0)
    rows.update(
        {
            "datapath": report.datapath,
            "eps single flow goodput ratio": report.eps_goodput_ratio,
            "ocs single flow goodput ratio": report.ocs_goodput_ratio,
            "eps all-to-all goodput ratio": report.all_to_all_eps_goodput_ratio,
            "ocs all-to-all goodput ratio": report.all_to_all_ocs_goodput_ratio,
            "steering ok": report.steering_ok,
            "cpu idle under load %": report.cpu_idle_under_load_pct,
        }
    )
    for delay_ms in (10.0, 50.0, 100.0):
        with console.status(f"dark time at {delay_ms:g} ms x{args.repeats} ..."):
            ratios = dark_time_ratios(delay_ms, args.repeats)
        rows[f"dark time ratio {delay_ms:g} ms (median)"] = statistics.median(ratios)
        rows[f"dark time ratio {delay_ms:g} ms (max)"] = max(ratios)
    for racks, hosts in ((4, 2), (10, 2)):
        with console.status(f"bring-up/tear-down {racks}x{hosts} ..."):
            up, down = lifecycle_seconds(racks, hosts)
        rows[f"bring-up {racks}x{hosts} s"] = up
        rows[f"tear-down {racks}x{hosts} s"] = down

    if args.json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="hybridbed fidelity benchmark")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in rows.items():
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    Console().print(table)


if __name__ == "__main__":
    main()
