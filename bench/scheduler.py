"""Scheduler decision cost: how long one heartbeat's decision takes with 1K and 15K pending tasks.

A heartbeat is one host with free containers asking for work; the decision is the policy's preemptions
and share changes, then its choice of tasks for that host, plus the core's bookkeeping (SchedulerCore.act
and .schedule, as both backends call them every round, on a cluster where only that host has room).
Run time advances as the hosts' heartbeats arrive: each host every HEARTBEAT_S, so one heartbeat moves
the clock HEARTBEAT_S / hosts, and periodic work (DSP's preemption epochs) falls on the share of
heartbeats it falls on in a cluster of that size. Periodic plans (DSP's MILP) are solved off the
decision path in a worker process, as the emulated scheduler solves them (scheduler/plan_solver.py), so
they show in the p99 only through the CPU they take from the decisions.
Target (Tetris Table 7, YARN's Fair): <= 0.2 ms median at 15K pending tasks, or within 2x Fair's median
measured in the same run (Fair is measured again right before each policy, so a machine that slows down
or speeds up mid-run moves both alike), and no stalls: p99 <= 10 ms (the max column shows the slowest heartbeat, such
as one that carries a preemption epoch or a plan at a job's arrival). JobPacker claims the same cost as
Fair. The jobs are recurring and shuffle-heavy, so planning policies plan them first (their offline
planning time is printed too). No root needed:
    .venv/bin/python bench/scheduler.py
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from hybridbed.scheduler.cluster import ClusterState, HostState, NetworkView
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.model import JobSpec, Resources, build_job
from hybridbed.scheduler.plan_solver import ProcessSolver
from hybridbed.scheduler.policy import make_policy, registered_policies

CONTAINER = Resources(1, 256)
HEARTBEAT_S = 1.0  # YARN's yarn.resourcemanager.nodemanagers.heartbeat-interval-ms default, 1000 ms


# the JobPacker paper's simulation: 10 Gb/s NICs, 30 Gb/s ToR-EPS, 100 Gb/s ToR-OCS, 1.125 GB elephants
PAPER_NETWORK = NetworkView(eps_uplink_Bps=30e9 / 8, ocs_Bps=100e9 / 8, elephant_bytes=1.125e9)


@dataclass(frozen=True)
class DecisionCost:
    median_ms: float
    p99_ms: float
    max_ms: float
    planning_s: float
    full_collections: int  # of Python's garbage collector, during the timed decisions (each one a pause)


def measure(
    policy_name: str, pending_tasks: int, jobs: int, racks: int, hosts_per_rack: int, heartbeats: int
) -> DecisionCost:
    """Milliseconds per heartbeat (median, p99, max) with `pending_tasks` maps spread over `jobs` jobs, the
    policy's planning time in seconds, and the full garbage collections that fell within timed decisions."""
    hosts = {
        f"r{r}h{h}": HostState(f"r{r}h{h}", r, 1, Resources(1, 256))
        for r in range(racks)
        for h in range(hosts_per_rack)
    }
    cluster = ClusterState(racks, hosts, slowstart=1.0, network=PAPER_NETWORK)
    policy = make_policy(policy_name)
    policy.plan_solver = ProcessSolver()
    core = SchedulerCore(policy, cluster, random.Random(1))
    per_job = pending_tasks // jobs
    specs = [
        JobSpec(f"j{j}", 0.0, per_job * 128_000_000, 20_000_000_000, 0, per_job, 10, 10.0, 10.0, recurring=True)
        for j in range(jobs)
    ]
    started = time.perf_counter()
    policy.plan(specs, cluster)
    planning_s = time.perf_counter() - started
    for spec in specs:
        core.submit(build_job(spec, CONTAINER), 0.0)
    names = list(hosts)
    for host in hosts.values():  # every host busy, so a heartbeat is one host asking
        host.resize(0)
    costs = []
    rng = random.Random(2)
    gc.collect()  # not the garbage of the runs measured before: each measure starts from a clean heap
    full_collections = 0  # Python's full (generation 2) garbage collections during the timed decisions
    for i in range(heartbeats):
        now = i * HEARTBEAT_S / len(hosts)
        host = hosts[rng.choice(names)]
        host.resize(len(host.running) + 1)
        collections = gc.get_stats()[2]["collections"]
        start = time.perf_counter()
        core.act(now)
        launches = core.schedule(now, [host.name])  # the host whose heartbeat this is, as the simulator asks
        costs.append((time.perf_counter() - start) * 1000)
        full_collections += gc.get_stats()[2]["collections"] - collections
        for launch in launches:  # hand the task back at once, so the pending count stays the same
            core.task_failed(launch.task.task_id, launch.task.attempt, now)
        host.resize(len(host.running))
    policy.plan_solver.close()
    costs.sort()
    return DecisionCost(
        statistics.median(costs), costs[int(len(costs) * 0.99)], costs[-1], planning_s, full_collections
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heartbeats", type=int, default=5000)
    parser.add_argument("--racks", type=int, default=20)
    parser.add_argument("--hosts-per-rack", type=int, default=30)
    parser.add_argument("--policies", nargs="*", help="default: every registered policy")
    args = parser.parse_args()
    table = Table(title="scheduler decision cost per heartbeat (600 hosts)")
    columns = (
        "policy",
        "pending tasks",
        "jobs",
        "median ms",
        "p99 ms",
        "max ms",
        "median / 0.2 ms",
        "median / Fair",
        "planning s",
        "full GCs",
    )
    for column in columns:
        table.add_column(column, justify="right")
    sizes = ((1_000, 50), (15_000, 100))
    shape = (args.racks, args.hosts_per_rack, args.heartbeats)
    console = Console()
    for policy in args.policies or sorted(registered_policies()):
        for pending, jobs in sizes:
            with console.status(f"{policy}, {pending} pending tasks ..."):
                fair = measure("fair", pending, jobs, *shape).median_ms
                cost = measure(policy, pending, jobs, *shape)
            table.add_row(
                policy,
                str(pending),
                str(jobs),
                f"{cost.median_ms:.4f}",
                f"{cost.p99_ms:.4f}",
                f"{cost.max_ms:.2f}",
                f"{cost.median_ms / 0.2:.2f}",
                f"{cost.median_ms / fair:.2f}",
                f"{cost.planning_s:.2f}",
                str(cost.full_collections),
            )
    console.print(table)


if __name__ == "__main__":
    main()
