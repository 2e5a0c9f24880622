"""Reading each flow's path off the circuit timeline, and the EPS/OCS byte split off the counters."""

from __future__ import annotations

import pandas as pd

from hybridbed.controller.events import OcsEvent
from hybridbed.results.path_accounting import flow_path, lit_intervals, uplink_bytes


def event(seq, before, after, dark_from, dark_until):
    def as_list(pairs):
        return [{"src_rack": a, "dst_rack": b} for a, b in pairs]

    return OcsEvent(seq, "api", dark_from, dark_from, dark_until, dark_until, 10.0, as_list(before), as_list(after))


EVENTS = [
    event(0, [], [(0, 1)], 10.0, 10.01),
    event(1, [(0, 1)], [(0, 1), (2, 3)], 20.0, 20.01),  # 0->1 unchanged, stays lit
    event(2, [(0, 1), (2, 3)], [(2, 3)], 30.0, 30.01),
]


def test_circuits_are_lit_from_dark_until_to_the_next_dark_from():
    intervals = lit_intervals(EVENTS)
    assert intervals[(0, 1)] == [(10.01, 30.0)]
    assert intervals[(2, 3)] == [(20.01, float("inf"))]


def test_flow_path_follows_its_circuit():
    intervals = lit_intervals(EVENTS)
    assert flow_path(0, 1, 12.0, 25.0, intervals) == "ocs"
    assert flow_path(0, 1, 2.0, 9.0, intervals) == "eps"
    assert flow_path(0, 1, 28.0, 35.0, intervals) == "mixed"
    assert flow_path(1, 0, 12.0, 25.0, intervals) == "eps"  # circuits are directed
    assert flow_path(3, 3, 0.0, 1.0, intervals) == "rack"


def test_uplink_bytes_are_counter_deltas_per_link_kind():
    links = pd.DataFrame(
        [
            {"link": "tor0-eps", "tx_bytes": 100},
            {"link": "tor0-ocs0", "tx_bytes": 1000},
            {"link": "tor0-eps", "tx_bytes": 150},
            {"link": "tor0-ocs0", "tx_bytes": 4000},
            {"link": "tor1-eps", "tx_bytes": 7},
            {"link": "tor1-eps", "tx_bytes": 17},
        ]
    )
    assert uplink_bytes(links) == (60, 3000)


def test_a_flow_gets_the_bytes_of_the_time_its_circuit_was_lit():
    from hybridbed.results.path_accounting import annotate_flows

    flows = pd.DataFrame(
        [
            {"src_rack": 0, "dst_rack": 1, "bytes": 1000, "start_s": 5.0, "end_s": 15.01},  # lit from 10.01
            {"src_rack": 0, "dst_rack": 1, "bytes": 1000, "start_s": 11.0, "end_s": 19.0},  # all lit
            {"src_rack": 1, "dst_rack": 1, "bytes": 1000, "start_s": 11.0, "end_s": 19.0},  # inside a rack
        ]
    )
    out = annotate_flows(flows, EVENTS, 0.0)
    assert list(out["path"]) == ["mixed", "ocs", "rack"]
    assert list(out["ocs_bytes"]) == [500, 1000, 0]
