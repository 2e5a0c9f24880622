from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridbed.controller import circuits
from hybridbed.controller.circuits import (
    Circuit,
    ConfigurationError,
    CounterReadings,
    MeasuredDemand,
    circuit_moves,
    elephant_demand,
    max_weight_configuration,
    max_weight_matching,
    parse_configuration,
    parse_demand,
)


def test_matching_serves_the_heaviest_directed_pairs():
    # 0->1 (10) and 1->0 (9) can both be lit: circuits are directed, one out and one in per rack
    demand = {(0, 1): 10.0, (1, 0): 9.0, (0, 2): 8.0, (2, 1): 1.0}
    config = max_weight_configuration(demand, ports_per_tor=1)
    assert {(c.src_rack, c.dst_rack) for c in config} == {(0, 1), (1, 0)}


def test_matching_maximises_total_weight_not_greedy_choice():
    # greedy would take 0->1 (5) and then only 1->... ; the optimum is 0->2 + 1->... with more in total
    demand = {(0, 1): 5.0, (0, 2): 4.0, (2, 1): 4.0}
    config = max_weight_configuration(demand, ports_per_tor=1)
    assert {(c.src_rack, c.dst_rack) for c in config} == {(0, 2), (2, 1)}


RACKS = 6
PAIRS = [(a, b) for a in range(RACKS) for b in range(RACKS) if a != b]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(PAIRS), st.integers(1, 4) | st.floats(1e6, 1e10), max_size=len(PAIRS)),
)
def test_the_matching_is_the_one_edmonds_algorithm_gives(demand):
    # small integers make ties (networkx chooses among them), floats unique optima (the assignment solver's)
    assert max_weight_matching(demand) == circuits._blossom_matching(demand)


def test_a_unique_best_matching_is_found_without_the_blossom_algorithm_and_ties_go_to_it(monkeypatch):
    unique = {(0, 1): 5.0, (0, 2): 4.0, (2, 1): 4.0}
    tied = {(0, 1): 1.0, (1, 0): 1.0, (0, 2): 1.0, (2, 0): 1.0}  # any sender 0 pair with any receiver 0 pair: 2
    expected = {name: circuits._blossom_matching(demand) for name, demand in (("unique", unique), ("tied", tied))}
    asked = []
    monkeypatch.setattr(circuits, "_blossom_matching", lambda demand: asked.append(demand) or expected["tied"])
    assert max_weight_matching(unique) == expected["unique"] == [(0, 2), (2, 1)] and asked == []
    assert max_weight_matching(tied) == expected["tied"] and asked == [tied]


def test_threshold_drops_mice_and_the_diagonal():
    matrix = [[50, 5, 20], [0, 0, 30], [0, 0, 0]]
    assert elephant_demand(matrix, threshold=10) == {(0, 2): 20, (1, 2): 30}


def test_two_ports_per_tor_light_two_circuits_per_rack_and_keep_existing_ports():
    demand = {(0, 1): 9.0, (0, 2): 8.0, (1, 0): 7.0, (2, 0): 6.0}
    current = frozenset({Circuit(0, 2, src_port=1, dst_port=1)})
    config = max_weight_configuration(demand, ports_per_tor=2, current=current)
    assert {(c.src_rack, c.dst_rack) for c in config} == {(0, 1), (0, 2), (1, 0), (2, 0)}
    assert Circuit(0, 2, 1, 1) in config
    assert len({(c.src_rack, c.src_port) for c in config}) == len(config)
    assert len({(c.dst_rack, c.dst_port) for c in config}) == len(config)


def test_unchanged_demand_gives_the_same_configuration():
    demand = {(0, 1): 3.0, (1, 2): 2.0, (2, 0): 1.0}
    first = max_weight_configuration(demand, 1)
    assert max_weight_configuration(demand, 1, current=first) == first


@pytest.mark.parametrize(
    "body, message",
    [
        ([{"src_rack": 0, "dst_rack": 4}], "unknown rack 4"),
        ([{"src_rack": 1, "dst_rack": 1}], "self-circuit"),
        ([{"src_rack": 0, "dst_rack": 1}, {"src_rack": 0, "dst_rack": 2}], "sends in two circuits"),
        ([{"src_rack": 0, "dst_rack": 1}, {"src_rack": 2, "dst_rack": 1}], "receives in two circuits"),
        ([{"src_rack": 0, "dst_rack": 1, "src_port": 1}], "unknown OCS port 1"),
        ([{"src_rack": 0, "dst_rack": True}], "must be an integer"),
        ([{"src_rack": 0, "dst_rack": 1, "colour": "red"}], "unknown field"),
        ({"src_rack": 0}, "must be a list"),
    ],
)
def test_invalid_configurations_name_the_problem(body, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_configuration(body, racks=4, ports_per_tor=1)


def test_valid_configuration_round_trips():
    config = parse_configuration([{"src_rack": 0, "dst_rack": 1}, {"src_rack": 1, "dst_rack": 0}], 2, 1)
    assert config == {Circuit(0, 1), Circuit(1, 0)}


@pytest.mark.parametrize(
    "matrix, message",
    [
        ([[0, -1], [0, 0]], r"demand\[0\]\[1\] must not be negative"),
        ([[0, "x"], [0, 0]], r"demand\[0\]\[1\] must be a finite number"),
        ([[0, float("nan")], [0, 0]], "finite"),
        ([[0, 1]], "list of 2 rows"),
        ([[0, 1], [0]], r"demand\[1\] must be a list of 2"),
    ],
)
def test_invalid_demand_is_rejected(matrix, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_demand(matrix, racks=2)


def test_interval_demand_is_the_last_intervals_bytes_and_backlog_sums_them_until_a_pair_goes_idle():
    intervals = [[[0, 4], [1, 0]], [[0, 4], [0, 0]], [[0, 4], [2, 0]]]
    interval, backlog = MeasuredDemand(2, "interval"), MeasuredDemand(2, "backlog")
    seen = [(interval.update(m), backlog.update(m)) for m in intervals]
    assert [i for i, _ in seen] == intervals
    # 0->1 keeps sending: 4, 8, 12 (crosses a threshold of 10 no single interval reaches); 1->0 paused once
    assert [b for _, b in seen] == [[[0, 4], [1, 0]], [[0, 8], [0, 0]], [[0, 12], [2, 0]]]


def test_a_flow_entry_added_again_counts_from_zero_even_once_past_the_old_entrys_last_reading():
    counters, steering = CounterReadings(), (3, 0x2_0001)
    assert counters.delta(steering, 500, 1.0) == 500  # first read: every byte since it was added
    assert counters.delta(steering, 800, 1.5) == 300
    # the circuit went dark and lit again: the new entry, 0.4 s old, has counted 900 bytes, all of them new
    # (read by count alone, 900 - 800 = 100)
    assert counters.delta(steering, 900, 0.4) == 900
    assert counters.delta(steering, 1000, 0.9) == 100
    assert counters.delta(steering, 50, 0.2) == 50  # added again, and still below the last reading
    assert counters.delta((4, 0x2_0001), 70, 5.0) == 70  # another switch's entry of the same cookie


def test_circuit_moves_keep_a_circuit_lit_unless_relit():
    a, b, c = Circuit(0, 1), Circuit(1, 2), Circuit(2, 0)
    removed, added, unsteer, steer = circuit_moves(frozenset({a, b}), frozenset({a, c}))
    assert (removed, added) == ({b}, {c})
    assert set(unsteer) == {(1, 2)} and set(steer) == {(2, 0)}  # 0->1 keeps flowing
    removed, added, unsteer, steer = circuit_moves(frozenset({a, b}), frozenset({a, b}), relight=True)
    assert removed == added == {a, b}
    assert set(unsteer) == set(steer) == {(0, 1), (1, 2)}
    assert circuit_moves(frozenset(), frozenset(), relight=True) == (frozenset(), frozenset(), {}, {})
