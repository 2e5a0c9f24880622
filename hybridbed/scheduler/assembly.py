"""The scheduler a scenario asks for: its hosts' resources, the network rates its planners assume, and the
policy, cluster state and core over a given set of hosts. Both backends build their scheduler here."""

from __future__ import annotations

import random

from hybridbed.config.scenario import Scenario
from hybridbed.scheduler.cluster import ClusterState, HostState, NetworkView
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.model import Resources
from hybridbed.scheduler.policy import make_policy


def host_capacity(scenario: Scenario) -> Resources:
    """What a host offers: the workers' cores, memory and disk, and its NIC in each direction."""
    w, nic = scenario.workers, scenario.fabric.host_rate_mbps
    return Resources(
        w.cores_per_host, w.memory_mb_per_host, w.disk_read_mbps_per_host, w.disk_write_mbps_per_host, nic, nic
    )


def container(scenario: Scenario) -> Resources:
    """The default container: what a task demands when its workload gives no demand of its own."""
    return Resources(scenario.workers.container.cores, scenario.workers.container.memory_mb)


def network_view(scenario: Scenario) -> NetworkView:
    """The rates a planning policy assumes: the fabric's configured rates and the scaled threshold."""
    f, to_bytes = scenario.fabric, 1e6 / 8
    return NetworkView(
        f.eps_uplink_mbps * to_bytes,
        f.ocs_rate_mbps * to_bytes if f.has_ocs else 0.0,
        scenario.scaled_ocs().elephant_threshold_bytes,
        size_scale=scenario.scale,
    )


def scheduler_core(scenario: Scenario, host_racks: dict[str, int]) -> SchedulerCore:
    """The policy, cluster state and scheduler core the scenario asks for, over these hosts (name -> rack)."""
    s, w = scenario.scheduler, scenario.workers
    policy = make_policy(s.policy, s.params_for(s.policy))
    slowstart = s.slowstart if s.slowstart is not None else policy.default_slowstart
    capacity = host_capacity(scenario)
    cluster = ClusterState(
        scenario.fabric.racks,
        {name: HostState(name, rack, w.slots_per_host, capacity) for name, rack in host_racks.items()},
        slowstart,
        network=network_view(scenario),
        precedence=policy.respects_precedence,
    )
    return SchedulerCore(policy, cluster, random.Random(scenario.seed), s.replicas)
