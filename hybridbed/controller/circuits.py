"""OCS circuit configurations: validation, and computing one from a rack-to-rack demand matrix.

A configuration is a directed matching of OCS ports: each (rack, port) sends to at most one port and
receives from at most one. Pure logic, shared by the os-ken controller and the flow-level simulator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from scipy.optimize import linear_sum_assignment

TIE_TOLERANCE = 1e-9  # matchings whose weights differ by less than this share of the best count as equal


class ConfigurationError(ValueError):
    """An invalid circuit configuration or demand matrix; the message says which entry and why."""


@dataclass(frozen=True, order=True)
class Circuit:
    """Light from rack `src_rack`'s OCS port `src_port` to rack `dst_rack`'s OCS port `dst_port`."""

    src_rack: int
    dst_rack: int
    src_port: int = 0
    dst_port: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "src_rack": self.src_rack,
            "dst_rack": self.dst_rack,
            "src_port": self.src_port,
            "dst_port": self.dst_port,
        }


Configuration = frozenset[Circuit]


def _integer(entry: dict, key: str, index: int, default: int | None = None) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"circuits[{index}].{key} must be an integer (got {value!r})")
    return value


def parse_configuration(data: Any, racks: int, ports_per_tor: int) -> Configuration:
    """Build a configuration from JSON (a list of circuit objects), rejecting anything not a directed matching."""
    if not isinstance(data, list):
        raise ConfigurationError(f"circuits must be a list of objects (got {type(data).__name__})")
    circuits = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise ConfigurationError(f"circuits[{i}] must be an object with src_rack and dst_rack")
        unknown = set(entry) - {"src_rack", "dst_rack", "src_port", "dst_port"}
        if unknown:
            raise ConfigurationError(f"circuits[{i}] has unknown field(s): {', '.join(sorted(unknown))}")
        circuits.append(
            Circuit(
                src_rack=_integer(entry, "src_rack", i),
                dst_rack=_integer(entry, "dst_rack", i),
                src_port=_integer(entry, "src_port", i, 0),
                dst_port=_integer(entry, "dst_port", i, 0),
            )
        )
    validate_configuration(circuits, racks, ports_per_tor)
    return frozenset(circuits)


def validate_configuration(circuits: Iterable[Circuit], racks: int, ports_per_tor: int) -> None:
    """Raise ConfigurationError unless every circuit is in range, no self-circuit, and no port is used twice."""
    senders: dict[tuple[int, int], Circuit] = {}
    receivers: dict[tuple[int, int], Circuit] = {}
    for c in circuits:
        for rack in (c.src_rack, c.dst_rack):
            if not 0 <= rack < racks:
                raise ConfigurationError(
                    f"unknown rack {rack} in circuit {c.src_rack}->{c.dst_rack} (racks are 0..{racks - 1})"
                )
        for port in (c.src_port, c.dst_port):
            if not 0 <= port < ports_per_tor:
                raise ConfigurationError(
                    f"unknown OCS port {port} in circuit {c.src_rack}->{c.dst_rack} (ports are 0..{ports_per_tor - 1})"
                )
        if c.src_rack == c.dst_rack:
            raise ConfigurationError(
                f"self-circuit {c.src_rack}->{c.dst_rack}: a rack cannot send to itself over the OCS"
            )
        out_key, in_key = (c.src_rack, c.src_port), (c.dst_rack, c.dst_port)
        if out_key in senders:
            raise ConfigurationError(
                f"rack {c.src_rack} OCS port {c.src_port} sends in two circuits (to {senders[out_key].dst_rack} and {c.dst_rack})"
            )
        if in_key in receivers:
            raise ConfigurationError(
                f"rack {c.dst_rack} OCS port {c.dst_port} receives in two circuits (from {receivers[in_key].src_rack} and {c.src_rack})"
            )
        senders[out_key] = c
        receivers[in_key] = c


def parse_demand(data: Any, racks: int) -> list[list[float]]:
    """Validate a racks x racks matrix of non-negative byte counts (row = sender, column = receiver)."""
    if not isinstance(data, list) or len(data) != racks:
        raise ConfigurationError(f"demand must be a list of {racks} rows (one per sending rack)")
    matrix = []
    for a, row in enumerate(data):
        if not isinstance(row, list) or len(row) != racks:
            raise ConfigurationError(f"demand[{a}] must be a list of {racks} numbers")
        values = []
        for b, value in enumerate(row):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigurationError(f"demand[{a}][{b}] must be a finite number (got {value!r})")
            if value < 0:
                raise ConfigurationError(f"demand[{a}][{b}] must not be negative (got {value!r})")
            values.append(float(value))
        matrix.append(values)
    return matrix


def elephant_demand(matrix: list[list[float]], threshold: float) -> dict[tuple[int, int], float]:
    """The OCS-worthy entries of a demand matrix: off-diagonal, positive, and at least the threshold."""
    return {
        (a, b): value
        for a, row in enumerate(matrix)
        for b, value in enumerate(row)
        if a != b and value > 0 and value >= threshold
    }


def max_weight_configuration(
    demand: dict[tuple[int, int], float], ports_per_tor: int, current: Configuration = frozenset()
) -> Configuration:
    """Circuits serving the most demand: one max-weight bipartite matching (`max_weight_matching`) per OCS port.

    With k ports per ToR the rack pairs come from k successive matchings, each on the pairs not yet
    served. Pairs that already have a circuit keep its ports, so unchanged circuits stay lit.
    """
    remaining = dict(demand)
    pairs: list[tuple[int, int]] = []
    for _ in range(ports_per_tor):
        matched = max_weight_matching(remaining)
        if not matched:
            break
        pairs += matched
        for pair in matched:
            del remaining[pair]
    return assign_ports(pairs, ports_per_tor, current)


def max_weight_matching(demand: dict[tuple[int, int], float]) -> list[tuple[int, int]]:
    """The rack pairs (sender, receiver) of a maximum-weight matching of positive demands, sorted.

    Edmonds' blossom algorithm (networkx) decides, as the JobPacker paper's controller does (§5.1.2). It is
    pure Python (tens of milliseconds at 20 racks: 7 of a profiled paper-scale Fair run's 80 s), and the matching
    is bipartite, so an assignment solver (scipy, microseconds) gives the same answer whenever the optimum is
    the only one: it is, if leaving out any one of its pairs loses weight. Only with ties does networkx
    choose among the equal matchings."""
    if not demand or min(demand.values()) <= 0:  # a pair without demand may or may not be matched
        return _blossom_matching(demand)
    senders = sorted({a for a, _ in demand})
    receivers = sorted({b for _, b in demand})
    row, column = {a: i for i, a in enumerate(senders)}, {b: j for j, b in enumerate(receivers)}
    weights = np.zeros((len(senders), len(receivers)))
    for (a, b), weight in demand.items():
        weights[row[a], column[b]] = weight
    best, chosen = _assignment(weights)
    for i, j in chosen:
        weight, weights[i, j] = weights[i, j], 0.0
        without, _ = _assignment(weights)
        weights[i, j] = weight
        if without >= best * (1 - TIE_TOLERANCE):
            return _blossom_matching(demand)
    return sorted((senders[i], receivers[j]) for i, j in chosen)


def _assignment(weights: np.ndarray) -> tuple[float, list[tuple[int, int]]]:
    """A maximum-weight assignment of rows to columns: its weight and its (row, column) pairs of positive weight."""
    rows, columns = linear_sum_assignment(weights, maximize=True)
    return float(weights[rows, columns].sum()), [(i, j) for i, j in zip(rows, columns) if weights[i, j] > 0]


def _blossom_matching(demand: dict[tuple[int, int], float]) -> list[tuple[int, int]]:
    graph = nx.Graph()
    for (a, b), weight in demand.items():
        graph.add_edge(("out", a), ("in", b), weight=weight)
    pairs = []
    for u, v in nx.max_weight_matching(graph):
        (_, a), (_, b) = sorted((u, v), key=lambda node: node[0] != "out")
        pairs.append((a, b))
    return sorted(pairs)


def drain_time(matrix: list[list[float]], rate: float) -> float:
    """Time for one-circuit-per-rack OCS to carry a rack-to-rack byte matrix, the JobPacker paper's §2.2
    model: successive max-weight configurations, each held until the largest entry it serves is sent
    (no reconfiguration delay, intra-rack entries need no circuit)."""
    remaining = elephant_demand(matrix, 0.0)
    total = 0.0
    while remaining:
        config = max_weight_configuration(remaining, ports_per_tor=1)
        served = [(c.src_rack, c.dst_rack) for c in config]
        total += max(remaining[pair] for pair in served) / rate
        for pair in served:
            del remaining[pair]
    return total


def assign_ports(pairs: list[tuple[int, int]], ports_per_tor: int, current: Configuration) -> Configuration:
    """Give each rack pair a circuit, keeping the ports of circuits that already serve the pair."""
    kept = {}
    for c in sorted(current):
        if (c.src_rack, c.dst_rack) in pairs and (c.src_rack, c.dst_rack) not in kept:
            kept[(c.src_rack, c.dst_rack)] = c
    used_out = {(c.src_rack, c.src_port) for c in kept.values()}
    used_in = {(c.dst_rack, c.dst_port) for c in kept.values()}
    circuits = set(kept.values())
    for a, b in pairs:
        if (a, b) in kept:
            continue
        src_port = next(k for k in range(ports_per_tor) if (a, k) not in used_out)
        dst_port = next(k for k in range(ports_per_tor) if (b, k) not in used_in)
        used_out.add((a, src_port))
        used_in.add((b, dst_port))
        circuits.add(Circuit(a, b, src_port, dst_port))
    return frozenset(circuits)


def steering(config: Configuration) -> dict[tuple[int, int], int]:
    """Rack pair -> the OCS port its ToR sends on (the lowest, if several circuits serve the pair)."""
    ports: dict[tuple[int, int], int] = {}
    for c in sorted(config, reverse=True):
        ports[(c.src_rack, c.dst_rack)] = c.src_port
    return ports


def steering_changes(
    before: Configuration, after: Configuration
) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """(pairs to steer off their circuit port, pairs to steer onto a new one) when `before` becomes `after`;
    pairs whose circuit stays are in neither and keep flowing."""
    old, new = steering(before), steering(after)
    unsteer = {pair: port for pair, port in old.items() if new.get(pair) != port}
    steer = {pair: port for pair, port in new.items() if old.get(pair) != port}
    return unsteer, steer


def circuit_moves(
    before: Configuration, after: Configuration, relight: bool = False
) -> tuple[Configuration, Configuration, dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """(circuits to take down, circuits to set up, pairs to steer off, pairs to steer on) for a reconfiguration
    from `before` to `after`. Circuits kept stay lit, unless `relight`: then the OCS goes through an empty
    configuration, every circuit going dark for the reconfiguration delay (`ocs.skip_unchanged: false`, an OCS
    that reconfigures every interval whatever the matching)."""
    if relight:
        empty: Configuration = frozenset()
        return before, after, steering_changes(before, empty)[0], steering_changes(empty, after)[1]
    return (before - after, after - before, *steering_changes(before, after))


def combined_demand(hints: list[list[float]], measured: list[list[float]], source: str) -> list[list[float]]:
    """The rack-to-rack demand periodic mode matches on: the scheduler's hints, the bytes measured in
    the last interval, or (`both`) their sum."""
    use_hints, use_measured = source in ("hints", "both"), source in ("measured", "both")
    return [
        [(h if use_hints else 0.0) + (m if use_measured else 0.0) for h, m in zip(hint_row, measured_row)]
        for hint_row, measured_row in zip(hints, measured)
    ]


class CounterReadings:
    """The bytes each flow entry (switch, cookie) counted since it was last read. An entry deleted and added again
    (a pair's steering onto a circuit, every time its circuit is lit) counts from zero again; it is told apart by
    its age, which restarts too, because its new count may already have passed the old entry's last reading."""

    def __init__(self) -> None:
        self._last: dict[tuple[int, int], tuple[int, float]] = {}  # (switch, cookie) -> (bytes, age s) last read

    def delta(self, entry: tuple[int, int], byte_count: int, age_s: float) -> int:
        """Bytes since the last reading of `entry`, read now as `byte_count` at `age_s` seconds old."""
        last = self._last.get(entry)
        self._last[entry] = (byte_count, age_s)
        if last is None or age_s < last[1] or byte_count < last[0]:
            return byte_count  # a new entry: all of its bytes are new
        return byte_count - last[0]


class MeasuredDemand:
    """The measured rack-to-rack demand periodic mode matches on, from each interval's bytes: those bytes
    (`interval`), or (`backlog`) a pair's bytes summed over the intervals since it last sent nothing."""

    def __init__(self, racks: int, mode: str):
        self.mode = mode
        self.matrix = [[0.0] * racks for _ in range(racks)]

    def update(self, interval_bytes: list[list[float]]) -> list[list[float]]:
        """Take one interval's bytes; returns the demand now."""
        if self.mode == "backlog":
            self.matrix = [
                [total + sent if sent > 0 else 0.0 for total, sent in zip(totals, sents)]
                for totals, sents in zip(self.matrix, interval_bytes)
            ]
        else:
            self.matrix = [list(row) for row in interval_bytes]
        return self.matrix


def configuration_as_list(config: Configuration) -> list[dict[str, int]]:
    return [c.as_dict() for c in sorted(config)]
