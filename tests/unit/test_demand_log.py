"""The demand every periodic reconfiguration matched on (controller/demand_log.py), and why circuits went dark
read from it (results/phases.py's `circuit_endings`)."""

from __future__ import annotations

import json

import pandas as pd

from hybridbed.controller.circuits import Circuit
from hybridbed.controller.demand_log import DEMAND_FIELDS, append_demand_log, demand_rows, read_demand_log
from hybridbed.controller.events import OcsEvent
from hybridbed.results.phases import circuit_endings

THRESHOLD = 100.0


def matrix(entries: dict[tuple[int, int], float], racks: int = 3) -> list[list[float]]:
    return [[entries.get((a, b), 0.0) for b in range(racks)] for a in range(racks)]


def test_rows_are_the_pairs_the_matching_could_light_or_take_down():
    sent = matrix({(0, 1): 60.0, (1, 2): 5.0, (2, 0): 40.0})
    measured = matrix({(0, 1): 160.0, (1, 2): 5.0, (2, 0): 40.0})  # 0->1's backlog over two intervals
    hints = matrix({(2, 1): 150.0})
    demand = matrix({(0, 1): 160.0, (1, 2): 5.0, (2, 0): 40.0, (2, 1): 150.0})
    lit = frozenset({Circuit(1, 2, 0, 0)})
    rows = demand_rows(7.5, sent, measured, hints, demand, lit, THRESHOLD)
    by_pair = {(row["src_rack"], row["dst_rack"]): row for row in rows}
    # 2->0 is under the threshold and dark: nothing the matching does can turn on it
    assert set(by_pair) == {(0, 1), (1, 2), (2, 1)}
    assert by_pair[0, 1] == {
        "t_s": 7.5,
        "src_rack": 0,
        "dst_rack": 1,
        "sent_bytes": 60.0,
        "measured_bytes": 160.0,
        "hinted_bytes": 0.0,
        "demand_bytes": 160.0,
        "elephant": 1,
        "had_circuit": 0,
    }
    assert (by_pair[1, 2]["elephant"], by_pair[1, 2]["had_circuit"]) == (0, 1)
    assert (by_pair[2, 1]["hinted_bytes"], by_pair[2, 1]["elephant"]) == (150.0, 1)
    assert all(list(row) == DEMAND_FIELDS for row in rows)


def test_the_log_reads_back_relative_to_the_workloads_start_and_skips_a_line_cut_short(tmp_path):
    log = tmp_path / "ocs_demand.jsonl"
    assert read_demand_log(log, 0.0) == []
    rows = demand_rows(1000.25, matrix({(0, 1): 200.0}), matrix({(0, 1): 200.0}), matrix({}),
                       matrix({(0, 1): 200.0}), frozenset(), THRESHOLD)  # fmt: skip
    append_demand_log(log, rows)
    append_demand_log(log, [])  # an interval with nothing to log leaves the file as it was
    with log.open("a") as f:
        f.write(json.dumps(rows[0])[:20])  # a crash mid-write
    assert read_demand_log(log, 1000.0) == [{**rows[0], "t_s": 0.25}]


def event(seq: int, t: float, before: set[tuple[int, int]], after: set[tuple[int, int]]) -> dict:
    def circuits(pairs):
        return [{"src_rack": a, "src_port": 0, "dst_rack": b, "dst_port": 0} for a, b in sorted(pairs)]

    return OcsEvent(seq, "periodic", t, t, t + 0.01, t + 0.01, 10.0, circuits(before), circuits(after)).csv_row()


def demand_row(t: float, pair: tuple[int, int], sent: float, demand: float, had_circuit: bool) -> dict:
    return {
        "t_s": t,
        "src_rack": pair[0],
        "dst_rack": pair[1],
        "sent_bytes": sent,
        "measured_bytes": demand,
        "hinted_bytes": 0.0,
        "demand_bytes": demand,
        "elephant": int(demand >= THRESHOLD),
        "had_circuit": int(had_circuit),
    }


def test_each_circuit_taken_down_is_told_why_from_the_demand_it_was_decided_on():
    events = pd.DataFrame(
        [
            event(0, 1.0, set(), {(0, 1), (1, 2)}),
            # at 2.0: 0->1 sent nothing (its backlog restarts), 1->2 still sends but fell under the threshold
            event(1, 2.0, {(0, 1), (1, 2)}, {(2, 0)}),
            # at 3.0: 2->0 is still an elephant, but 2->1 outweighs it for rack 2's one port
            event(2, 3.000001, {(2, 0)}, {(2, 1)}),
            # a pinned reconfiguration, with no demand sample: left out
            event(3, 3.5, {(2, 1)}, set()),
        ]
    )
    demand = pd.DataFrame(
        [
            demand_row(1.0, (0, 1), 150.0, 150.0, False),
            demand_row(1.0, (1, 2), 120.0, 120.0, False),
            demand_row(2.0, (0, 1), 0.0, 0.0, True),
            demand_row(2.0, (1, 2), 20.0, 20.0, True),
            demand_row(2.0, (2, 0), 300.0, 300.0, False),
            demand_row(3.0, (2, 0), 100.0, 400.0, True),
            demand_row(3.0, (2, 1), 500.0, 500.0, False),
        ]
    )
    endings = circuit_endings(events, demand)
    assert list(endings.itertuples(index=False, name=None)) == [
        ("0->1", 2.0, "sent_nothing"),
        ("1->2", 2.0, "under_threshold"),
        ("2->0", 3.000001, "outmatched"),
    ]
    assert circuit_endings(events, demand.iloc[0:0]).empty
