"""The hybrid DCN as the flow model sees it: capacitated links, the path of each transfer, and the OCS
controller's periodic mode as steps in simulated time.

Links (bytes/s): each host's NIC up and down, each ToR's EPS uplink and the EPS core's downlink to it,
each ToR's OCS ports out and in. A transfer between racks a and b crosses the source NIC, either the
EPS up/down pair or the lit circuit a->b, and the destination NIC; within a rack only the two NICs;
within a host (a reducer reading its own host's map output, over loopback) none.

A path's fifth link is the task's own: a reducer's fetch connections together are held to its rate
(FlowTable gives a capped reducer a link of its own; the padding link otherwise).

When the scenario gives hosts a disk bandwidth, every host also has a disk-read and a disk-write link:
every transfer then also reads from its source's disk (a sixth link on its path), and reading a local
block or writing a task's output are transfers over the disk alone. Without it local reads and writes
cost nothing.
"""

from __future__ import annotations

import numpy as np

from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.controller.circuit_schedulers import Slot, circuit_scheduler
from hybridbed.controller.circuits import (
    Circuit,
    Configuration,
    circuit_moves,
    configuration_as_list,
)
from hybridbed.controller.events import OcsEvent

MBPS_TO_BYTES_S = 1e6 / 8
NETWORK_LINKS = 4  # source NIC, two core links, destination NIC; then the task's link and the source's disk


class FabricLinks:
    """Index and capacity of every link, and the links a transfer crosses."""

    def __init__(
        self, fabric: FabricSpec, host_racks: dict[str, int], disk_read_mbps: float = 0.0, disk_write_mbps: float = 0.0
    ):
        self.racks = fabric.racks
        self.ports = fabric.ocs_ports_per_tor if fabric.has_ocs else 0
        self.host_index = {name: i for i, name in enumerate(host_racks)}
        self.host_rack = np.array(list(host_racks.values()), dtype=np.int64)
        hosts = len(host_racks)
        self._host_up, self._host_down = 0, hosts
        self._eps_up, self._eps_down = 2 * hosts, 2 * hosts + self.racks
        self._ocs_up = 2 * hosts + 2 * self.racks
        self._ocs_down = self._ocs_up + self.racks * self.ports
        self._disk_read = self._ocs_down + self.racks * self.ports
        self._disk_write = self._disk_read + hosts
        self.none = self._disk_write + hosts  # padding: a link nothing saturates
        self.models_disk = disk_read_mbps > 0 or disk_write_mbps > 0
        self.path_links = NETWORK_LINKS + 1 + (1 if self.models_disk else 0)
        capacities = np.empty(self.none + 1)
        capacities[: 2 * hosts] = fabric.host_rate_mbps * MBPS_TO_BYTES_S
        capacities[self._eps_up : self._ocs_up] = fabric.eps_uplink_mbps * MBPS_TO_BYTES_S
        capacities[self._ocs_up : self._disk_read] = fabric.ocs_rate_mbps * MBPS_TO_BYTES_S
        capacities[self._disk_read : self._disk_write] = disk_read_mbps * MBPS_TO_BYTES_S or np.inf
        capacities[self._disk_write : self.none] = disk_write_mbps * MBPS_TO_BYTES_S or np.inf
        capacities[self.none] = np.inf
        self.capacities = capacities

    def host_usage_links(self) -> np.ndarray:
        """Per host (rows in host index order): its disk-read, disk-write, NIC-in and NIC-out links."""
        hosts = np.arange(len(self.host_index))
        return np.stack(
            [self._disk_read + hosts, self._disk_write + hosts, self._host_down + hosts, self._host_up + hosts], axis=1
        )

    def path(self, src: int, dst: int, circuit: Circuit | None, task_link: int | None = None) -> tuple[int, ...]:
        """Links from host index `src` to host index `dst`, over `circuit` if one carries their racks' traffic,
        and over `task_link` if the task's transfers share one."""
        rest = (self.none if task_link is None else task_link, *((self._disk_read + src,) if self.models_disk else ()))
        if src == dst:
            return (self.none,) * NETWORK_LINKS + rest
        a, b = int(self.host_rack[src]), int(self.host_rack[dst])
        up, down = self._host_up + src, self._host_down + dst
        if a == b:
            return up, self.none, self.none, down, *rest
        return (up, *self.core_links(a, b, circuit), down, *rest)

    def write_path(self, host: int) -> tuple[int, ...]:
        """Writing to a host's own disk (only where disks are modelled)."""
        return (self._disk_write + host,) + (self.none,) * (self.path_links - 1)

    def core_links(self, a: int, b: int, circuit: Circuit | None) -> tuple[int, int]:
        """The two links between racks a and b: the EPS uplink and downlink, or the circuit's two OCS ports."""
        if circuit is None:
            return self._eps_up + a, self._eps_down + b
        return (
            self._ocs_up + circuit.src_rack * self.ports + circuit.src_port,
            self._ocs_down + circuit.dst_rack * self.ports + circuit.dst_port,
        )

    @property
    def core(self) -> slice:
        """The links between ToRs and the core (EPS up and down, OCS ports out and in), contiguous."""
        return slice(self._eps_up, self._disk_read)

    @property
    def eps_uplinks(self) -> slice:
        """The ToRs' EPS uplinks, as positions within `core`."""
        return slice(0, self.racks)

    @property
    def ocs_uplinks(self) -> slice:
        """The ToRs' OCS ports out, as positions within `core`."""
        start = self._ocs_up - self._eps_up
        return slice(start, start + self.racks * self.ports)

    def core_positions(self, rack: int, ocs_port: int | None) -> tuple[int, int]:
        """Where a ToR's EPS uplink (ocs_port None) or OCS port sits within `core`: (its link up, its link down)."""
        if ocs_port is None:
            return rack, self.racks + rack
        out = self._ocs_up - self._eps_up + rack * self.ports + ocs_port
        return out, out + self.racks * self.ports


class SimulatedOcs:
    """The controller's periodic reconfiguration as the flow model replays it.

    At a tick the scenario's circuit scheduler (`controller/circuit_schedulers.py`, as in the controller) turns
    the demand into the interval's slots; each slot's configuration is set up at its offset. Rack pairs leaving
    a circuit go back to the EPS at once; new circuits carry traffic after the reconfiguration delay (while
    dark, their pairs use the EPS); unchanged circuits carry on. Every reconfiguration is recorded as the
    controller records it (times in simulated seconds).
    """

    def __init__(self, fabric: FabricSpec, spec: OcsSpec):
        self.racks = fabric.racks
        self.spec = spec
        self.scheduler = circuit_scheduler(fabric, spec)
        self.circuits: Configuration = frozenset()
        self.lit: dict[tuple[int, int], Circuit] = {}  # rack pairs whose traffic rides a circuit now
        self.busy_until = 0.0  # a reconfiguration under way ends here
        self.events: list[OcsEvent] = []
        self._lighting: dict[tuple[int, int], Circuit] = {}

    def schedule(self, demand: list[list[float]]) -> list[Slot]:
        """The interval's slots for this demand, in time order."""
        return self.scheduler.schedule(demand, self.circuits)

    def reconfigure(self, now: float, target: Configuration) -> tuple[list[tuple[int, int]], float | None]:
        """Set up `target` (the same circuits again too, all going dark, unless `skip_unchanged`). Returns the
        pairs that left their circuit now, and when the new circuits light (None: nothing changed)."""
        relight = target == self.circuits and not self.spec.skip_unchanged
        removed, added, unsteer, steer = circuit_moves(self.circuits, target, relight)
        if not removed and not added:
            return [], None
        for pair in unsteer:
            self.lit.pop(pair, None)
        serving = {(c.src_rack, c.dst_rack): c for c in sorted(target, reverse=True)}  # the lowest port wins
        self._lighting = {pair: serving[pair] for pair in steer}
        lit_at = now + self.spec.reconfig_delay_ms / 1000.0 if added else now
        self.events.append(
            OcsEvent(
                len(self.events),
                "periodic",
                now,
                now,
                lit_at,
                lit_at,
                self.spec.reconfig_delay_ms,
                configuration_as_list(self.circuits),
                configuration_as_list(target),
            )
        )
        self.circuits = target
        self.busy_until = lit_at
        return list(unsteer), lit_at

    def light(self) -> list[tuple[int, int]]:
        """The dark time is over: the new circuits carry their pairs' traffic. Returns those pairs."""
        self.lit.update(self._lighting)
        pairs, self._lighting = list(self._lighting), {}
        return pairs
