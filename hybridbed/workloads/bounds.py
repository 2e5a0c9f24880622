"""Lower bounds on a workload's makespan, one per resource: the workload's total demand on the resource
over the cluster's capacity of it. No schedule finishes before the largest; how far a policy's makespan
is above it says how much room a better schedule has left (the Tetris paper's argument in §2.2 and its
upper bound in §3.1 rest on the same totals). Scenarios state them; `hybridbed compare` prints them.

- cores: every task's demanded cores times its compute time;
- memory and containers: every task holds its memory and a container for at least its duration at its
  allotted rates (`transfers.expected_duration_s`: no transfer runs faster than its allotment);
- disk read: every input block is read off some host's disk once; disk write: every task writes its
  output (partitions for its children, or the job's output) to its host's disk;
- network: the fetched intermediate bytes over the hosts' NICs, as if every fetch left its host; a
  schedule that places a job's tasks together fetches some locally, so this one is not a strict bound.
Dimensions the scenario does not model (a disk bandwidth of 0) are left out.
"""

from __future__ import annotations

from hybridbed.config.scenario import Scenario
from hybridbed.scheduler.assembly import container, host_capacity
from hybridbed.scheduler.model import JobSpec, Resources, build_job
from hybridbed.scheduler.transfers import expected_duration_s
from hybridbed.workloads.build import build_workload

NETWORK = "network (every fetch remote)"


def makespan_lower_bounds(scenario: Scenario) -> dict[str, float]:
    """Seconds per resource (see the module's docstring), for the scenario's workload on its hosts."""
    return workload_bounds(
        build_workload(scenario),
        host_capacity(scenario),
        scenario.fabric.racks * scenario.fabric.hosts_per_rack,
        scenario.workers.slots_per_host,
        container(scenario),
    )


def workload_bounds(
    specs: list[JobSpec], capacity: Resources, hosts: int, slots: int, default_demand: Resources
) -> dict[str, float]:
    """Seconds per resource for these jobs on `hosts` hosts of `capacity` with `slots` containers each."""
    core_s = memory_mb_s = container_s = read_bits = written_bits = fetched_bits = 0.0
    for spec in specs:
        for task in build_job(spec, default_demand).tasks:
            duration = expected_duration_s(task)
            core_s += task.demand.cores * task.compute_s
            memory_mb_s += task.demand.memory_mb * duration
            container_s += duration
            read_bits += 8 * (task.input_block.size_bytes if task.input_block else 0)
            written_bits += 8 * task.written_bytes
            fetched_bits += 8 * task.fetch_bytes
    bounds = {
        "cores": core_s / (hosts * capacity.cores),
        "memory": memory_mb_s / (hosts * capacity.memory_mb),
        "containers": container_s / (hosts * slots),
    }
    for name, bits, mbps in (
        ("disk read", read_bits, capacity.disk_read_mbps),
        ("disk write", written_bits, capacity.disk_write_mbps),
        (NETWORK, fetched_bits, capacity.net_in_mbps),
    ):
        if mbps > 0:
            bounds[name] = bits / 1e6 / (hosts * mbps)
    return bounds
