"""The transfers in flight, as dense numpy arrays, and their max-min fair rates.

Rows are kept contiguous (a finished flow's row is refilled with the last one), so every step is a
handful of vector operations over the flows in flight. Rates are recomputed only when something
changed since the last computation: a flow started or ended, or a rack pair changed path.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hybridbed.controller.circuits import Circuit
from hybridbed.scheduler.model import Task
from hybridbed.simulator.fabric import PATH_LINKS, FabricLinks
from hybridbed.simulator.fairshare import max_min_rates

FINISH_TOLERANCE_S = 1e-6  # flows this close to their end finish together (partitions differ by a byte)


@dataclass(eq=False)
class Flow:
    """One transfer: a map reading its input from another host, or a reducer fetching a map's partition."""
    kind: str  # "input" or "shuffle"
    task: Task
    attempt: int
    map_index: int  # shuffle: the map whose partition this is
    src: str
    dst: str
    size: int
    start_s: float
    ocs_bytes: float = 0.0  # set when the flow finishes


class FlowTable:
    def __init__(self, links: FabricLinks):
        self.links = links
        self.flows: list[Flow] = []
        self.eps_uplink_bytes = 0.0  # bytes the ToRs sent up the EPS, and up the OCS, so far
        self.ocs_uplink_bytes = 0.0
        racks = links.racks
        self.pair_bytes = np.zeros(racks * racks)  # bytes per rack pair since take_pair_bytes
        self._pair_rate = np.zeros(racks * racks)
        self._eps_rate = self._ocs_rate = 0.0
        self._stale = False
        self._grow(1024)

    def _grow(self, rows: int) -> None:
        """Make room for `rows` flows, keeping the rows in use."""
        columns = {"paths": (self.links.none, np.int64, (PATH_LINKS,)), "pair": (-1, np.int64, ()), "remaining": (0.0, float, ()),
                   "rate": (0.0, float, ()), "cap": (np.inf, float, ()), "ocs": (0.0, float, ())}
        for name, (fill, dtype, width) in columns.items():
            new = np.full((rows, *width), fill, dtype=dtype)
            old = self.__dict__.get(name)
            if old is not None:
                new[: len(old)] = old
            setattr(self, name, new)

    def __len__(self) -> int:
        return len(self.flows)

    def add(self, flow: Flow, cap: float, circuit: Circuit | None) -> None:
        """Start a flow; `cap` is its own rate limit (inf: none), `circuit` what carries its racks' traffic."""
        row = len(self.flows)
        if row == len(self.remaining):
            self._grow(2 * row)
        src, dst = self.links.host_index[flow.src], self.links.host_index[flow.dst]
        self.flows.append(flow)
        self.paths[row] = self.links.path(src, dst, circuit)
        a, b = self.links.host_rack[src], self.links.host_rack[dst]
        self.pair[row] = a * self.links.racks + b if a != b else -1
        self.remaining[row], self.rate[row], self.cap[row], self.ocs[row] = flow.size, 0.0, cap, 0.0
        self._stale = True

    def reroute(self, a: int, b: int, circuit: Circuit | None) -> None:
        """Rack pair a->b now goes over `circuit` (None: the EPS)."""
        n = len(self.flows)
        rows = np.flatnonzero(self.pair[:n] == a * self.links.racks + b)
        if rows.size:
            self.paths[rows, 1:3] = self.links.core_links(a, b, circuit)
            self._stale = True

    def advance(self, dt: float) -> None:
        """Move every flow on by dt seconds at its current rate."""
        if dt <= 0 or not self.flows:
            return
        n = len(self.flows)
        sent = self.rate[:n] * dt
        self.remaining[:n] -= sent
        self.ocs[:n] += sent * self.links.is_ocs_uplink(self.paths[:n, 1])
        self.eps_uplink_bytes += self._eps_rate * dt
        self.ocs_uplink_bytes += self._ocs_rate * dt
        self.pair_bytes += self._pair_rate * dt

    def time_to_next_finish(self) -> float:
        if not self.flows:
            return np.inf
        n = len(self.flows)
        with np.errstate(divide="ignore"):
            return max(0.0, float(np.min(self.remaining[:n] / self.rate[:n])))

    def pop_finished(self) -> list[Flow]:
        """Remove and return the flows that have sent everything (in the order they were started)."""
        n = len(self.flows)
        done = np.flatnonzero(self.remaining[:n] <= self.rate[:n] * FINISH_TOLERANCE_S)
        finished = []
        arrays = (self.paths, self.pair, self.remaining, self.rate, self.cap, self.ocs)
        for row in done[::-1]:  # from the end, so a row moved into a hole is never one still to remove
            flow = self.flows[row]
            flow.ocs_bytes = min(float(self.ocs[row]), flow.size)
            finished.append(flow)
            last = len(self.flows) - 1
            if row != last:
                for array in arrays:
                    array[row] = array[last]
                self.flows[row] = self.flows[last]
            self.flows.pop()
        if finished:
            self._stale = True
        return sorted(finished, key=lambda f: f.start_s) if len(finished) > 1 else finished

    def settle(self) -> None:
        """Recompute the max-min fair rates if anything changed since the last time."""
        if not self._stale:
            return
        self._stale = False
        n = len(self.flows)
        paths = self.paths[:n]
        rates = max_min_rates(paths, self.links.capacities, self.cap[:n])
        self.rate[:n] = rates
        self._eps_rate = float(rates[self.links.is_eps_uplink(paths[:, 1])].sum())
        self._ocs_rate = float(rates[self.links.is_ocs_uplink(paths[:, 1])].sum())
        cross = self.pair[:n] >= 0
        self._pair_rate = np.bincount(self.pair[:n][cross], weights=rates[cross], minlength=self.pair_bytes.size)

    def take_pair_bytes(self) -> list[list[float]]:
        """Bytes sent between every two racks since the last call (the controller's measured demand)."""
        racks = self.links.racks
        measured = self.pair_bytes.reshape(racks, racks).tolist()
        self.pair_bytes = np.zeros(racks * racks)
        return measured
