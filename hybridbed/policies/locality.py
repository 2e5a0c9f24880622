"""Delay scheduling for map locality (Zaharia et al., EuroSys'10), shared by Fair and the planned policies.

A job offered a container on a host where none of its pending maps has a replica is skipped (the
container goes to the next job in the policy's order) until it has waited `node_delay_s`; then it may
launch a map whose block is in the host's rack, and after a further `rack_delay_s` any map, reading
its block across racks. A node-local launch resets the wait. The waits are time-based, as YARN's
`locality-delay-node-ms` / `locality-delay-rack-ms`; YARN leaves them off by default, 1 s (two
heartbeats) each is hybridbed's choice.
"""

from __future__ import annotations

from pydantic import Field

from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Job, Task
from hybridbed.scheduler.policy import PolicyParams


class LocalityParams(PolicyParams):
    node_delay_s: float = Field(default=1.0, ge=0, description="a job waits this long for a node-local map")
    rack_delay_s: float = Field(default=1.0, ge=0, description="then this much longer for a rack-local one")


class DelayScheduling:
    """Which of a job's pending maps may start on a host now, given how long the job has waited for locality."""

    def __init__(self, params: LocalityParams) -> None:
        self.node_delay_s = params.node_delay_s
        self.rack_delay_s = params.rack_delay_s
        self._waiting_since: dict[str, float] = {}

    def map_for(self, job: Job, host: HostState, cluster: ClusterState) -> Task | None:
        """A pending map of `job` for `host`, or None while the job still waits for a better-placed one."""
        pending = cluster.pending[job.job_id]
        if not pending.maps:
            return None
        task = pending.node_local(host.name)
        if task is not None:
            self._waiting_since.pop(job.job_id, None)
            return task
        waited = cluster.now - self._waiting_since.setdefault(job.job_id, cluster.now)
        if waited < self.node_delay_s:
            return None
        if waited < self.node_delay_s + self.rack_delay_s:
            return pending.rack_local(host.rack)
        return pending.rack_local(host.rack) or pending.any_map()

    def node_local_only(self, job: Job, cluster: ClusterState) -> bool:
        """Whether `map_for` offers the job's maps only where their blocks are, whatever the host: it has
        none pending, or it is still within `node_delay_s` of its wait (as `map_for` started it)."""
        if not cluster.pending[job.job_id].maps:
            return True
        since = self._waiting_since.get(job.job_id)
        return since is not None and cluster.now - since < self.node_delay_s
