"""Whether this machine can hold an emulated run, checked before anything is built.

An emulated host is real processes: a worker agent, its Mininet shell, and a process per running task. Their
memory was measured (proportional set size, psutil) during `hybridbed compare scenarios/quickstart.yaml` on a
2-core Debian VM with Python 3.11: scheduler 115 MB, controller 72 MB, ovs-vswitchd and ovsdb-server 22 MB
together, the run's watchdog 20 MB (resident); per host an agent 12.6 MB and a Mininet shell 0.45 MB (14 shells: 8 hosts, 6 switches); 10.9 MB per task
process. A fabric whose estimate exceeds the memory available is refused by field, instead of failing
half-built. (The simulation backend has no such processes and takes any size.) So is a TCP congestion control
for the hosts that this machine's kernel does not have.
"""

from __future__ import annotations

import psutil

from hybridbed.config.scenario import Scenario
from hybridbed.config.servers import place_racks
from hybridbed.testbed.host_stack import available_congestion_controls, congestion_control_problems

RUN_FIXED_MB = 230.0  # scheduler, controller, Open vSwitch and the watchdog
HOST_MB = 13.5  # a worker agent and its Mininet shell, rounded up
TASK_MB = 11.0  # one task process
MEMORY_SHARE = 0.8  # of the memory available when the run is checked; the rest is left to the machine


def emulation_memory_mb(scenario: Scenario) -> float:
    """Memory the run's processes take with every task slot busy."""
    return RUN_FIXED_MB + _hosts_here(scenario) * (HOST_MB + scenario.workers.slots_per_host * TASK_MB)


def _hosts_here(scenario: Scenario) -> int:
    """The emulated hosts on this machine: all of them, or its racks' when `servers` spreads the fabric (each
    further server's preflight checks its own share)."""
    racks_here = place_racks(scenario.fabric.racks, scenario.servers).count(0)
    return racks_here * scenario.fabric.hosts_per_rack


def emulation_problems(
    scenario: Scenario, available_mb: float | None = None, congestion_controls: list[str] | None = None
) -> list[str]:
    """Why this machine, with `available_mb` of memory and `congestion_controls` in its kernel (by default what
    it has now), cannot emulate the scenario (one line per field), or nothing."""
    if congestion_controls is None:
        congestion_controls = available_congestion_controls()
    problems = congestion_control_problems(scenario.fabric.tcp_congestion_control, congestion_controls)
    return problems + _memory_problems(scenario, available_mb)


def _memory_problems(scenario: Scenario, available_mb: float | None) -> list[str]:
    if available_mb is None:
        available_mb = psutil.virtual_memory().available / 2**20
    need = emulation_memory_mb(scenario)
    if need <= MEMORY_SHARE * available_mb:
        return []
    f, w = scenario.fabric, scenario.workers
    return [
        f"fabric: {_hosts_here(scenario)} hosts on this machine (of {f.racks} racks x {f.hosts_per_rack}) with "
        f"workers.slots_per_host {w.slots_per_host} "
        f"need about {need:,.0f} MB for their emulated processes, and {MEMORY_SHARE:.0%} of this machine's "
        f"{available_mb:,.0f} MB available is {MEMORY_SHARE * available_mb:,.0f} MB; use fewer hosts or slots, "
        "or --backend simulation"
    ]
