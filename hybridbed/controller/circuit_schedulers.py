"""Circuit schedulers: which circuits periodic mode sets up in an interval, and when (`ocs.scheduler`).

Each turns the rack-to-rack demand (bytes) into the interval's schedule: one or more slots, each a circuit
configuration and the offset from the interval's start at which it is set up. The controller and the
flow-level simulator run the same schedulers, so a choice means the same in both backends.

- `edmonds`: one max-weight matching of the elephant demand per interval (JobPacker §5.1.2: Edmonds' algorithm
  at every reconfiguration).
- `greedy`: the heaviest elephant rack pairs first, each taking a circuit while both its ToRs have a free port
  (the 1/2-approximation of max-weight matching, the simplest baseline of circuit-scheduling studies).
- `solstice`: Solstice (Liu et al., CoNEXT'15): the elephant demand, in seconds of circuit time, is capped to
  what one interval can carry, stripped of entries too small for a configuration of their own, stuffed into a
  doubly stochastic matrix and sliced Birkhoff-von-Neumann style into perfect matchings at halving thresholds
  (big slices first); the slices share the interval, each after a reconfiguration delay.
- `rotor`: RotorNet/Opera (Mellette et al., SIGCOMM'17; NSDI'20): demand-oblivious, one interval per matching
  of a fixed round-robin set (rack a sends to rack (a + s) mod n, s = 1 .. n-1), every pair served once per
  n-1 intervals. Only direct paths: the two-hop Valiant load balancing of RotorLB is not modelled.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.controller.circuits import Configuration, assign_ports, elephant_demand, max_weight_configuration

MBPS_TO_BYTES_S = 1e6 / 8
# Solstice: the shortest configuration ("day") is 9 reconfiguration delays, a 90 % duty cycle, as the Solstice
# authors configure it on their Etalon testbed (min_day_len = 9 x reconfiguration delay), and never under
# twice the delay (their decomposition's rule: a duty cycle of at least 50 %).
SOLSTICE_MIN_DAY_OVER_DELAY = 9.0
# Solstice's thresholds start at the smallest power-of-two multiple of the shortest day that reaches a quarter
# of the interval (its decomposition's starting threshold).
SOLSTICE_FIRST_THRESHOLD_SHARE = 0.25
# Without a reconfiguration delay (which Solstice never assumes) the shortest day is this share of the interval:
# hybridbed's choice, so that slicing still ends.
SOLSTICE_MIN_DAY_SHARE = 0.01


@dataclass(frozen=True)
class Slot:
    """A configuration set up `offset_s` seconds after the interval starts (it lights after the delay)."""

    offset_s: float
    configuration: Configuration


class CircuitScheduler(ABC):
    """One interval's circuits from its demand."""

    def __init__(self, racks: int, ports_per_tor: int, threshold_bytes: float):
        self.racks = racks
        self.ports_per_tor = ports_per_tor
        self.threshold_bytes = threshold_bytes

    def elephants(self, demand: list[list[float]]) -> dict[tuple[int, int], float]:
        return elephant_demand(demand, self.threshold_bytes)

    @abstractmethod
    def schedule(self, demand: list[list[float]], current: Configuration) -> list[Slot]:
        """The interval's slots in time order; the first at offset 0 (possibly the empty configuration)."""


class EdmondsScheduler(CircuitScheduler):
    def schedule(self, demand: list[list[float]], current: Configuration) -> list[Slot]:
        return [Slot(0.0, max_weight_configuration(self.elephants(demand), self.ports_per_tor, current))]


class GreedyScheduler(CircuitScheduler):
    def schedule(self, demand: list[list[float]], current: Configuration) -> list[Slot]:
        return [Slot(0.0, greedy_configuration(self.elephants(demand), self.ports_per_tor, current))]


class RotorScheduler(CircuitScheduler):
    """Steps through the round-robin matchings, one per interval, whatever the demand."""

    def __init__(self, racks: int, ports_per_tor: int, threshold_bytes: float):
        super().__init__(racks, ports_per_tor, threshold_bytes)
        self.round = 0

    def schedule(self, demand: list[list[float]], current: Configuration) -> list[Slot]:
        config = rotor_configuration(self.racks, self.ports_per_tor, self.round, current)
        self.round += 1
        return [Slot(0.0, config)]


class SolsticeScheduler(CircuitScheduler):
    def __init__(self, racks: int, threshold_bytes: float, circuit_bytes_s: float, interval_s: float, delay_s: float):
        super().__init__(racks, 1, threshold_bytes)
        self.circuit_bytes_s = circuit_bytes_s
        self.interval_s = interval_s
        self.delay_s = delay_s

    def schedule(self, demand: list[list[float]], current: Configuration) -> list[Slot]:
        seconds = np.zeros((self.racks, self.racks))
        for (a, b), size in self.elephants(demand).items():
            seconds[a, b] = size / self.circuit_bytes_s
        days = solstice_days(seconds, self.interval_s, self.delay_s)
        if not days:
            return [Slot(0.0, frozenset())]
        slots: list[Slot] = []
        offset = 0.0
        for pairs, length in days:
            previous = slots[-1].configuration if slots else current
            slots.append(Slot(offset, assign_ports(pairs, 1, previous)))
            offset += length
        return slots


def circuit_scheduler(fabric: FabricSpec, ocs: OcsSpec) -> CircuitScheduler:
    """The scenario's scheduler (`ocs.scheduler`) for its fabric; `ocs` is the controller's (scaled) settings."""
    racks, ports, threshold = fabric.racks, fabric.ocs_ports_per_tor, ocs.elephant_threshold_bytes
    if ocs.scheduler == "greedy":
        return GreedyScheduler(racks, ports, threshold)
    if ocs.scheduler == "rotor":
        return RotorScheduler(racks, ports, threshold)
    if ocs.scheduler == "solstice":
        return SolsticeScheduler(
            racks,
            threshold,
            fabric.ocs_rate_mbps * MBPS_TO_BYTES_S,
            ocs.reconfig_interval_s,
            ocs.reconfig_delay_ms / 1000.0,
        )
    return EdmondsScheduler(racks, ports, threshold)


def greedy_configuration(
    demand: dict[tuple[int, int], float], ports_per_tor: int, current: Configuration = frozenset()
) -> Configuration:
    """Rack pairs heaviest first, each taking a circuit while its sender and receiver have a free port."""
    sending: dict[int, int] = {}
    receiving: dict[int, int] = {}
    pairs = []
    for (a, b), _ in sorted(demand.items(), key=lambda item: (-item[1], item[0])):
        if sending.get(a, 0) < ports_per_tor and receiving.get(b, 0) < ports_per_tor:
            pairs.append((a, b))
            sending[a] = sending.get(a, 0) + 1
            receiving[b] = receiving.get(b, 0) + 1
    return assign_ports(pairs, ports_per_tor, current)


def rotor_configuration(racks: int, ports_per_tor: int, round_: int, current: Configuration) -> Configuration:
    """Round `round_` of the rotor cycle: port p of every rack sends to the rack a shift of
    1 + ((round x ports + p) mod (racks - 1)) ahead, so successive rounds visit every shift in turn."""
    shifts = racks - 1
    if shifts < 1:
        return frozenset()
    chosen = sorted({1 + (round_ * ports_per_tor + p) % shifts for p in range(min(ports_per_tor, shifts))})
    return assign_ports([(a, (a + s) % racks) for s in chosen for a in range(racks)], ports_per_tor, current)


def solstice_days(seconds: np.ndarray, interval_s: float, delay_s: float) -> list[tuple[list[tuple[int, int]], float]]:
    """Solstice's schedule for one interval: (rack pairs with circuits, length including the delay) per day.

    `seconds[a, b]` is the circuit time the pair's demand needs. Steps (Solstice, CoNEXT'15):
    norm down (each sender's and receiver's total capped to the interval, max-min fairly), trim entries shorter
    than the shortest day (the EPS carries them), stuff into a doubly stochastic matrix (real entries first),
    slice perfect matchings at thresholds halving from the first one, each slice as long as its smallest entry
    and lighting its whole matching (but a rack's pair with itself), and fit the slices into the interval (drop
    the shortest while they do not fit, then share the slack out). A slice of stuffing alone is left out.
    """
    min_day = max(SOLSTICE_MIN_DAY_OVER_DELAY * delay_s, 2 * delay_s) or SOLSTICE_MIN_DAY_SHARE * interval_s
    if min_day + delay_s > interval_s:
        return []
    target = norm_down(seconds, interval_s - delay_s)
    target[target < min_day] = 0.0
    if not target.any():
        return []
    left = stuff(target)
    threshold = min_day
    while threshold < SOLSTICE_FIRST_THRESHOLD_SHARE * interval_s:
        threshold *= 2
    days: list[tuple[list[tuple[int, int]], float]] = []
    while threshold >= min_day and left.any():
        while (matching := perfect_matching(left >= threshold)) is not None:
            length = min(left[a, b] for a, b in matching)
            for a, b in matching:
                left[a, b] -= length
            left[left < 1e-12] = 0.0
            if any(target[a, b] > 0 for a, b in matching):  # a day of stuffing alone would serve nothing
                # the switch holds the whole matching: pairs lit for stuffing carry what demand they have
                days.append(([(a, b) for a, b in matching if a != b], length + delay_s))
        threshold /= 2
    return fit_days(days, interval_s, min_day + delay_s)


def norm_down(seconds: np.ndarray, budget_s: float) -> np.ndarray:
    """Cap every row and column sum at budget_s, max-min fairly over the entries (progressive filling)."""
    result = np.zeros_like(seconds)
    open_ = seconds > 0
    rows, cols = np.full(seconds.shape[0], budget_s), np.full(seconds.shape[1], budget_s)
    while open_.any():
        per_row, per_col = open_.sum(axis=1), open_.sum(axis=0)
        with np.errstate(divide="ignore"):
            row_room = np.where(per_row > 0, rows / np.maximum(per_row, 1), np.inf)
            col_room = np.where(per_col > 0, cols / np.maximum(per_col, 1), np.inf)
        step = min((seconds - result)[open_].min(), row_room.min(), col_room.min())
        result[open_] += step
        rows -= step * per_row
        cols -= step * per_col
        full_rows, full_cols = rows <= 1e-12, cols <= 1e-12
        open_ &= (seconds - result > 1e-12) & ~full_rows[:, None] & ~full_cols[None, :]
    return result


def stuff(target: np.ndarray) -> np.ndarray:
    """Raise entries until every row and column sums to the largest line sum (a doubly stochastic matrix up to
    scale), adding to entries with real demand first, so that slices follow the demand."""
    stuffed = target.copy()
    norm = max(stuffed.sum(axis=1).max(), stuffed.sum(axis=0).max())
    for a, b in sorted(zip(*np.nonzero(stuffed)), key=lambda ab: (-stuffed[ab], ab)):
        room = min(norm - stuffed[a].sum(), norm - stuffed[:, b].sum())
        if room > 0:
            stuffed[a, b] += room
    while True:
        row_room, col_room = norm - stuffed.sum(axis=1), norm - stuffed.sum(axis=0)
        a, b = int(np.argmax(row_room)), int(np.argmax(col_room))
        step = min(row_room[a], col_room[b])
        if step <= 1e-12 * max(norm, 1.0):
            return stuffed
        stuffed[a, b] += step


def perfect_matching(allowed: np.ndarray) -> list[tuple[int, int]] | None:
    """A perfect matching of senders to receivers over the allowed entries (Hopcroft-Karp, scipy; the same
    matching in every process, which a matching over hashed node names would not give), or None."""
    receivers = maximum_bipartite_matching(csr_matrix(allowed.astype(np.int8)), perm_type="column")
    if (receivers < 0).any():
        return None
    return [(a, int(b)) for a, b in enumerate(receivers)]


def fit_days(
    days: list[tuple[list[tuple[int, int]], float]], interval_s: float, shortest_s: float
) -> list[tuple[list[tuple[int, int]], float]]:
    """The days fitted to the interval: while they do not fit, drop the shortest (the EPS carries its demand);
    shorten none below `shortest_s`; share any slack out in proportion to length."""
    kept = list(days)
    while kept and sum(length for _, length in kept) > interval_s:
        if len(kept) * shortest_s <= interval_s:
            excess = sum(length for _, length in kept) - interval_s
            room = sum(length - shortest_s for _, length in kept)
            return [(pairs, length - excess * (length - shortest_s) / room) for pairs, length in kept]
        kept.remove(min(kept, key=lambda day: day[1]))
    total = sum(length for _, length in kept)
    return [(pairs, length * interval_s / total) for pairs, length in kept] if kept else []
