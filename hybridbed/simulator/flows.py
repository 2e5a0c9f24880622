"""The transfers in flight, as dense numpy arrays, and their max-min fair rates.

Rows are kept contiguous (a finished flow's row is refilled with the last one), so every step is a
handful of vector operations over the flows in flight. Rates are recomputed only when something
changed since the last computation: a flow started or ended, a rack pair changed path, a task's rate
changed. Flows with the same path and cap get the same rate, so the computation runs once per distinct
(path, cap).

A task whose transfers share one rate (a reducer's fetch connections, held to its network-in allotment
or the scenario's per-task cap together) gets a link of its own, after the fabric's links, that all its
flows cross: max-min sharing then gives the task its rate in all and its connections their fair parts.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numba
import numpy as np
from numba import literal_unroll

from hybridbed.controller.circuits import Circuit
from hybridbed.scheduler.model import Task
from hybridbed.simulator.fabric import FabricLinks
from hybridbed.simulator.fairshare import LINK_INDEX, RateSolver, link_loads
from hybridbed.simulator.relaxed_rates import RelaxedMaxMin
from hybridbed.workers.shuffle import Connection

# Flows finish together when each is within this share of its time so far from its end (and within a
# microsecond always): one rate computation then serves them all. A flow ends at most 0.5 % early; the
# makespans of the paper-scale batch move by less than that (docs/running.md, the flow-level simulator).
FINISH_FRACTION = 0.005
FINISH_TOLERANCE_S = 1e-6  # flows this close to their end finish together (partitions differ by a byte)

# the flow table's columns, one row per flow in flight: (name, value of an unused row, dtype)
_FLOW_COLUMNS = (
    ("cls", 0, np.int64),  # its class
    ("pair", -1, np.int64),  # its rack pair (-1: within a rack)
    ("start", 0.0, np.float64),  # when it started
    ("remaining", 0.0, np.float64),  # bytes it has still to send
    ("rate", 0.0, np.float64),  # bytes/s now
    ("ocs", 0.0, np.float64),  # bytes it sent over the OCS
    ("on_ocs", False, np.bool_),  # it rides a circuit now
    ("steerable", False, np.bool_),  # it may ride a circuit
)


@dataclass(eq=False)
class Flow:
    """One transfer: a map reading its input from another host, a reducer fetching a parent task's
    partition, or a task writing its output to its disk."""

    kind: str  # "input", "shuffle" or "write" (a task's output to its own disk, where disks are modelled)
    task: Task
    attempt: int
    connection: Connection | None  # shuffle: the parent outputs this fetch connection copies
    src: str
    dst: str
    size: int
    start_s: float
    ocs_bytes: float = 0.0  # set when the flow finishes
    elephant: bool = False  # a shuffle connection of an elephant aggregate


class FlowTable:
    # the columns of _FLOW_COLUMNS, one row per flow in flight (made and grown by _grow_flows)
    cls: np.ndarray
    pair: np.ndarray
    start: np.ndarray
    remaining: np.ndarray
    rate: np.ndarray
    ocs: np.ndarray
    on_ocs: np.ndarray
    steerable: np.ndarray

    def __init__(self, links: FabricLinks, rates: RateSolver | None = None):
        """`rates`: a stateless max-min computation instead of the relaxed one (bench/simulator.py and the
        tests compare the reference with it)."""
        self.links = links
        # the max-min computation, told which classes changed since the last (a stateless one does not listen)
        self._solve: RelaxedMaxMin | _StatelessRates = RelaxedMaxMin() if rates is None else _StatelessRates(rates)
        self._rekeyed: list[int] = []  # classes given a new (cap, path) since the last computation
        self._recounted: list[int] = []  # classes whose flows came or went since the last computation
        self.flows: list[Flow] = []
        core_links = links.core.stop - links.core.start
        self.core_bytes = np.zeros(core_links)  # bytes over each link between the ToRs and the core so far
        racks = links.racks
        # bytes per rack pair so far, of the flows that may ride a circuit (all, or the marked), and the whole
        # bytes of them take_pair_bytes has counted
        self.pair_bytes = np.zeros(racks * racks)
        self._pair_bytes_taken = np.zeros(racks * racks)
        self._pair_rate: np.ndarray = np.zeros(racks * racks)
        self._next_finish: float | None = None  # time_to_next_finish's answer, kept until the flows move on
        self._stale = False
        # flow classes: flows with one (cap, path) share a row in the rate computation
        self._class_of: dict[tuple, int] = {}
        self._class_keys: list[tuple | None] = []  # every class below the highest in use (None: free)
        self._free_classes: list[int] = []  # a heap of free classes, lowest first (entries may be stale)
        self.class_paths = np.full((0, links.path_links), links.none, dtype=LINK_INDEX)
        self.class_cap = np.zeros(0)
        self.class_count = np.zeros(0)  # flows per class (a float: the rate computation's weights)
        self.class_rate = np.zeros(0)
        self.capacities = links.capacities.copy()  # the fabric's links, then the tasks' links
        self._loads = np.zeros(len(self.capacities))  # bytes/s over every link at the rates last computed
        self._free_task_links: list[int] = []
        self._grow_flows(1024)

    def _grow_flows(self, rows: int) -> None:
        """Make room for `rows` flows, keeping the rows in use."""
        for name, fill, dtype in _FLOW_COLUMNS:
            new = np.full(rows, fill, dtype=dtype)
            old = self.__dict__.get(name)
            if old is not None:
                new[: len(old)] = old
            setattr(self, name, new)

    def __len__(self) -> int:
        return len(self.flows)

    # classes --------------------------------------------------------------------------------------
    def _join_class(self, path: tuple[int, ...], cap: float) -> int:
        key = (cap, *path)
        cid = self._class_of.get(key)
        if cid is None:
            cid = self._lowest_free_class()
            if cid is not None:
                self._class_keys[cid] = key
            else:
                cid = len(self._class_keys)
                self._class_keys.append(key)
                if cid == len(self.class_cap):
                    size = max(1024, 2 * cid)
                    self.class_paths = np.concatenate(
                        [self.class_paths, np.full((size - cid, self.links.path_links), self.links.none, LINK_INDEX)]
                    )
                    for name in ("class_cap", "class_count", "class_rate"):
                        old = getattr(self, name)
                        setattr(self, name, np.concatenate([old, np.zeros(size - cid, dtype=old.dtype)]))
            self._class_of[key] = cid
            self.class_paths[cid] = path
            self.class_cap[cid] = cap
            self._rekeyed.append(cid)
        self.class_count[cid] += 1
        self._recounted.append(cid)
        return cid

    def _leave_class(self, cid: int) -> None:
        self.class_count[cid] -= 1
        self._recounted.append(cid)
        if self.class_count[cid] == 0:
            self._free_class(cid)

    def _free_class(self, cid: int) -> None:
        """The class has no flows left: its row is free for another (cap, path). Free rows at the end are
        dropped, so that a computation passes over the classes up to the highest in use only."""
        keys = self._class_keys
        del self._class_of[keys[cid]]
        keys[cid] = None
        heapq.heappush(self._free_classes, cid)
        while keys and keys[-1] is None:
            keys.pop()

    def _lowest_free_class(self) -> int | None:
        """The lowest free class below the highest in use (None: none), so that the classes in use gather
        low and the highest falls as classes empty."""
        free, keys = self._free_classes, self._class_keys
        while free:
            cid = heapq.heappop(free)
            if cid < len(keys) and keys[cid] is None:  # else dropped from the end, or in use again since
                return cid
        return None

    # task links -----------------------------------------------------------------------------------
    def open_task_link(self, rate: float) -> int:
        """A link of `rate` bytes/s for one task's flows to share."""
        if not self._free_task_links:
            start = len(self.capacities)
            self.capacities = np.concatenate([self.capacities, np.zeros(max(64, start - self.links.none))])
            self._free_task_links = list(range(len(self.capacities) - 1, start - 1, -1))
        link = self._free_task_links.pop()
        self.set_task_link(link, rate)
        return link

    def set_task_link(self, link: int, rate: float) -> None:
        self.capacities[link] = rate
        self._stale = True

    def close_task_link(self, link: int) -> None:
        """The task is done with its link (its flows are gone)."""
        self._free_task_links.append(link)

    # flows ----------------------------------------------------------------------------------------
    def add(
        self,
        flow: Flow,
        cap: float,
        circuit: Circuit | None,
        remaining: float | None = None,
        task_link: int | None = None,
        steerable: bool = True,
    ) -> None:
        """Start a flow (or go on with one taken out by `take_out`: `remaining` bytes still to send); `cap` is
        its own rate limit (inf: none), `circuit` what carries its racks' traffic (if the flow is `steerable`:
        may ride a circuit), `task_link` the link its task's flows share (None: none)."""
        circuit = circuit if steerable else None
        row = len(self.flows)
        if row == len(self.remaining):
            self._grow_flows(2 * row)
        src, dst = self.links.host_index[flow.src], self.links.host_index[flow.dst]
        self.flows.append(flow)
        write = flow.kind == "write"
        path = self.links.write_path(src) if write else self.links.path(src, dst, circuit, task_link)
        self.cls[row] = self._join_class(path, cap)
        a, b = self.links.host_rack[src], self.links.host_rack[dst]
        self.pair[row] = a * self.links.racks + b if a != b else -1
        self.remaining[row], self.rate[row] = flow.size if remaining is None else remaining, 0.0
        self.ocs[row] = flow.ocs_bytes
        self.start[row], self.on_ocs[row] = flow.start_s, circuit is not None and a != b
        self.steerable[row] = steerable
        self._stale = True

    def reroute(self, a: int, b: int, circuit: Circuit | None) -> None:
        """Rack pair a->b's steerable flows now go over `circuit` (None: the EPS)."""
        n = len(self.flows)
        core = self.links.core_links(a, b, circuit)
        for row in np.flatnonzero((self.pair[:n] == a * self.links.racks + b) & self.steerable[:n]):
            old = int(self.cls[row])
            nic_up, _, _, nic_down, *rest = (int(link) for link in self.class_paths[old])
            path = (nic_up, *core, nic_down, *rest)
            cap = float(self.class_cap[old])
            self._leave_class(old)
            self.cls[row] = self._join_class(path, cap)
            self.on_ocs[row] = circuit is not None
            self._stale = True

    def advance(self, dt: float) -> None:
        """Move every flow on by dt seconds at its current rate."""
        if dt <= 0 or not self.flows:
            return
        _advance(self.remaining, self.ocs, self.rate, self.on_ocs, len(self.flows), dt)
        self._next_finish = None
        core = self.links.core
        self.core_bytes += self._loads[core.start : core.stop] * dt
        self.pair_bytes += self._pair_rate * dt

    def time_to_next_finish(self) -> float:
        """Seconds until the first flow has sent everything at its rate now (0 if one is due)."""
        if not self.flows:
            return np.inf
        if self._next_finish is None or self._stale:  # not since the rates were last computed
            self._next_finish = _time_to_next_finish(self.remaining, self.rate, len(self.flows))
        return self._next_finish

    def pop_finished(self, now: float) -> list[Flow]:
        """Remove and return the flows that have sent everything, in the order they were started (those started
        at one instant from the last row up)."""
        done = _finished_rows(self.remaining, self.rate, self.start, len(self.flows), now)
        finished = [flow for flow, _ in reversed(self._drop_rows(done))]
        return sorted(finished, key=lambda f: f.start_s) if len(finished) > 1 else finished

    def take_out(self, task: Task) -> list[tuple[Flow, float]]:
        """Remove the task's flows (it was suspended or killed): each with the bytes it has still to send."""
        return self._drop_rows(np.array([row for row, flow in enumerate(self.flows) if flow.task is task], np.int64))

    def take_out_pair(self, a: int, b: int) -> list[tuple[Flow, float]]:
        """Remove rack pair a->b's steerable flows (their circuit went dark and they wait for the next)."""
        n = len(self.flows)
        return self._drop_rows(np.flatnonzero((self.pair[:n] == a * self.links.racks + b) & self.steerable[:n]))

    def _drop_rows(self, rows: np.ndarray) -> list[tuple[Flow, float]]:
        """Remove these rows (ascending; their OCS bytes so far go with their flows), each with the bytes it has
        still to send, in their order. From the last row: each row's place is taken by the last one, so no row
        still to remove is moved."""
        if not rows.size:
            return []
        dropped = [self.flows[row] for row in rows.tolist()]
        for flow, sent in zip(dropped, self.ocs[rows].tolist(), strict=True):
            flow.ocs_bytes = min(sent, flow.size)
        remaining = self.remaining[rows].tolist()
        self._recounted.extend(self.cls[rows].tolist())
        columns = tuple(getattr(self, name) for name, _, _ in _FLOW_COLUMNS)
        emptied = _remove_rows(rows, len(self.flows), self.cls, self.class_count, columns)
        flows = self.flows
        for row in rows[::-1].tolist():
            last = flows.pop()
            if row < len(flows):
                flows[row] = last
        for cid in emptied.tolist():
            self._free_class(cid)
        self._stale = True
        return list(zip(dropped, remaining, strict=True))

    def link_loads(self) -> np.ndarray:
        """Bytes/s crossing every link at the rates last computed."""
        return self._loads

    def settle(self) -> None:
        """Recompute the max-min fair rates if anything changed since the last time."""
        if not self._stale:
            return
        self._stale = False
        # every class row up to the highest in use, the free ones below it too (no flows: weight 0, they take
        # nothing): no copy of the live ones
        classes = len(self._class_keys)
        paths, caps, weights = self.class_paths[:classes], self.class_cap[:classes], self.class_count[:classes]
        # (a class rekeyed and emptied since the last computation may lie past the highest in use)
        rekeyed = np.array([cid for cid in self._rekeyed if cid < classes], dtype=np.int64)
        recounted = np.array(self._recounted, dtype=np.int64)  # those past the highest in use have no flows
        self.class_rate[:classes] = self._solve(paths, self.capacities, caps, weights, rekeyed, recounted)
        self._loads = self._solve.loads
        self._rekeyed.clear()
        self._recounted.clear()
        self._pair_rate, self._next_finish = _spread_rates(
            self.class_rate,
            self.cls,
            self.pair,
            self.steerable,
            len(self.flows),
            self.rate,
            self.pair_bytes.size,
            self.remaining,
        )

    @property
    def eps_uplink_bytes(self) -> float:
        """Bytes the ToRs have sent up the EPS so far."""
        return float(self.core_bytes[self.links.eps_uplinks].sum())

    @property
    def ocs_uplink_bytes(self) -> float:
        """Bytes the ToRs have sent out of their OCS ports so far."""
        return float(self.core_bytes[self.links.ocs_uplinks].sum())

    def steerable_by_pair(self) -> dict[tuple[int, int], list[tuple[Flow, float]]]:
        """Per rack pair (a, b), its flows in flight that may ride a circuit, each with the bytes it has still to
        send."""
        n = len(self.flows)
        rows = np.flatnonzero(self.steerable[:n] & (self.pair[:n] >= 0))
        by_pair: dict[tuple[int, int], list[tuple[Flow, float]]] = {}
        for row, pair, left in zip(rows.tolist(), self.pair[rows].tolist(), self.remaining[rows].tolist(), strict=True):
            by_pair.setdefault(divmod(pair, self.links.racks), []).append((self.flows[row], left))
        return by_pair

    def take_pair_bytes(self) -> list[list[float]]:
        """Whole bytes sent between every two racks since the last call by flows that may ride a circuit (the
        controller's measured demand: all traffic, or the marked traffic when only marked traffic may). Whole,
        as the switch counters the controller reads count them: equal demands then tie exactly, whatever the
        last bits of the rates that moved them, and the circuit matching does not turn on those bits."""
        racks = self.links.racks
        counted = np.floor(self.pair_bytes)
        measured = (counted - self._pair_bytes_taken).reshape(racks, racks).tolist()
        self._pair_bytes_taken = counted
        return measured


class _StatelessRates:
    """A stateless max-min computation (the reference, in bench/simulator.py and the tests) behind the relaxed
    one's interface: told the classes rekeyed and recounted, which it ignores, and leaving the links' loads in
    `loads`."""

    def __init__(self, rates: RateSolver):
        self._rates = rates
        self.loads = np.zeros(0)

    def __call__(
        self,
        paths: np.ndarray,
        capacities: np.ndarray,
        caps: np.ndarray,
        weights: np.ndarray,
        _rekeyed: np.ndarray,
        _recounted: np.ndarray,
    ) -> np.ndarray:
        rates = self._rates(paths, capacities, caps, weights)
        self.loads = link_loads(paths, weights, rates, capacities.size)
        return rates


@numba.njit(cache=True, error_model="numpy")
def _spread_rates(class_rate, cls, pair, steerable, n, rate, pairs, remaining):  # pragma: no cover (compiled)
    """Give each of the n flows its class's rate (into `rate`); return the rate of the flows that may ride a
    circuit between each rack pair (the measured demand), and, from the same pass, `_time_to_next_finish`."""
    pair_rate = np.zeros(pairs)
    soonest = np.inf
    for row in range(n):
        r = class_rate[cls[row]]
        rate[row] = r
        if pair[row] >= 0 and steerable[row]:
            pair_rate[pair[row]] += r
        soonest = min(soonest, _time_left(remaining[row], r))
    return pair_rate, max(soonest, 0.0)


@numba.njit(cache=True)
def _remove_rows(rows, n, cls, class_count, columns):  # pragma: no cover (compiled)
    """Remove these rows (ascending) of the first n from the flow table's `columns` (those of _FLOW_COLUMNS),
    from the last: each row's place is taken by the last one. Returns the classes (`cls`, one of the columns)
    left without flows, in the order they emptied."""
    emptied = np.empty(rows.size, dtype=np.int64)
    count = 0
    last = n - 1
    for i in range(rows.size - 1, -1, -1):
        row = rows[i]
        cid = cls[row]
        class_count[cid] -= 1
        if class_count[cid] == 0:
            emptied[count] = cid
            count += 1
        if row != last:
            for column in literal_unroll(columns):
                column[row] = column[last]
        last -= 1
    return emptied[:count]


@numba.njit(cache=True)
def _advance(remaining, ocs, rate, on_ocs, n, dt):  # pragma: no cover (compiled)
    """The first n flows send for dt seconds at their rates (into `remaining` and, over a circuit, `ocs`)."""
    for row in range(n):
        sent = rate[row] * dt
        remaining[row] -= sent
        if on_ocs[row]:
            ocs[row] += sent


@numba.njit(cache=True, error_model="numpy")
def _time_left(remaining, rate):  # pragma: no cover (compiled)
    """Seconds a flow needs to send what it has left at its rate: inf with no rate; -1 when it is due (nothing
    left, or less than nothing: the caller's minimum is then below 0, read as due now)."""
    left = remaining / rate  # nothing left and no rate: nan
    return left if left >= 0.0 else -1.0


@numba.njit(cache=True, error_model="numpy")
def _time_to_next_finish(remaining, rate, n):  # pragma: no cover (compiled)
    """Seconds until the first of the first n flows has sent everything at its rate (0 if one is due)."""
    soonest = np.inf
    for row in range(n):
        soonest = min(soonest, _time_left(remaining[row], rate[row]))
    return max(soonest, 0.0)


@numba.njit(cache=True)
def _finished_rows(remaining, rate, start, n, now):  # pragma: no cover (compiled)
    """The rows, in order, of the first n flows that are done: within FINISH_FRACTION of their time so far
    (and FINISH_TOLERANCE_S always) from their end at their rate."""
    done = np.empty(n, dtype=np.int64)
    count = 0
    for row in range(n):
        slack = max(FINISH_TOLERANCE_S, FINISH_FRACTION * (now - start[row]))
        if remaining[row] <= rate[row] * slack:
            done[count] = row
            count += 1
    return done[:count]
