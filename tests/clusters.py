"""Cluster states that the scheduler's and planners' unit tests build: racks of identical hosts."""

from __future__ import annotations

from hybridbed.scheduler.cluster import ClusterState, HostState, NetworkView
from hybridbed.scheduler.model import Resources

MEMORY_MB_PER_SLOT = 256


def grid_cluster(
    racks: int, hosts: int = 2, slots: int = 2, slowstart: float = 1.0, network: NetworkView | None = None
) -> ClusterState:
    """`racks` racks of `hosts` hosts `r<rack>h<host>`, each with `slots` containers of one core."""
    return ClusterState(
        racks,
        {
            f"r{r}h{h}": HostState(f"r{r}h{h}", r, slots, Resources(slots, slots * MEMORY_MB_PER_SLOT))
            for r in range(racks)
            for h in range(hosts)
        },
        slowstart,
        network=network,
    )
