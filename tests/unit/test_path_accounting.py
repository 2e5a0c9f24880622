"""Reading each flow's circuit bytes off its notes of what it received against the circuit timeline, and the
EPS/OCS byte split off the counters."""

from __future__ import annotations

import pandas as pd
import pytest

from hybridbed.controller.events import OcsEvent
from hybridbed.results.path_accounting import (
    annotate_flows,
    lit_intervals,
    ocs_bytes_received,
    received_column,
    uplink_bytes,
)


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


def test_the_bytes_received_while_lit_count_as_the_circuits_not_the_time_lit():
    # lit from 10.01 to 30.0; a flow from 5 to 15: 100 bytes by 10 (dark), then 1000 more by 15 (lit, at ten
    # times the rate); the stretch across the lit edge counts by the share of it lit
    spans = lit_intervals(EVENTS)[(0, 1)]
    notes = [(7.5, 50), (10.01, 100), (12.5, 600), (15.0, 1100)]
    assert ocs_bytes_received(notes, 5.0, spans) == 1000.0  # the time lit (a half) would give 550
    assert ocs_bytes_received([(10.5, 100)], 10.0, spans) == pytest.approx(100.0 * 0.49 / 0.5)  # 10.0-10.01 dark
    assert ocs_bytes_received([(28.0, 10), (32.0, 50)], 26.0, spans) == 10 + 40 * 0.5
    assert ocs_bytes_received([(5.0, 100)], 5.0, spans) == 0.0  # all at once, dark then
    assert ocs_bytes_received([(12.0, 100)], 12.0, spans) == 100.0  # all at once, lit then


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


def test_each_flow_gets_the_bytes_it_received_while_its_circuit_was_lit():
    def flow(src, dst, start, notes, elephant=0):
        return {
            "src_rack": src,
            "dst_rack": dst,
            "bytes": notes[-1][1],
            "start_s": start,
            "elephant": elephant,
            "received": received_column(notes, start),
        }

    flows = pd.DataFrame(
        [
            flow(0, 1, 5.0, [(10.01, 100), (15.0, 1100)], elephant=1),  # dark to 10.01, then lit
            flow(0, 1, 11.0, [(15.0, 500), (19.0, 1000)]),  # all lit
            flow(1, 0, 11.0, [(19.0, 1000)]),  # circuits are directed: 1->0 was never lit
            flow(1, 1, 11.0, [(19.0, 1000)]),  # inside a rack
        ]
    )
    out = annotate_flows(flows, EVENTS, 0.0)
    assert list(out["path"]) == ["mixed", "ocs", "eps", "rack"]
    assert list(out["ocs_bytes"]) == [1000, 1000, 0, 0]
    elephants_only = annotate_flows(flows, EVENTS, 0.0, steering="elephant")
    assert list(elephants_only["ocs_bytes"]) == [1000, 0, 0, 0]
    assert list(annotate_flows(flows, EVENTS, 0.0, steering="marked")["ocs_bytes"]) == [0, 0, 0, 0]
    shifted = annotate_flows(flows.assign(start_s=flows["start_s"] - 100.0), EVENTS, 100.0)  # unix = t0 + start_s
    assert list(shifted["ocs_bytes"]) == [1000, 1000, 0, 0]
