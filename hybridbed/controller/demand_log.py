"""What each periodic reconfiguration matched on, per rack pair: ocs_demand.csv.

The controller appends its rows to a JSON-lines log (unix times) and the simulator writes them as it goes
(simulated seconds), so the two backends' circuit decisions can be compared input by input: a circuit lit for
a pair whose demand reached the elephant threshold, and taken down because that demand fell under the
threshold (with `measured_demand: backlog`, because the pair sent nothing for an interval) or because other
pairs outweighed it in the matching.
"""

from __future__ import annotations

import json
from pathlib import Path

from hybridbed.controller.circuits import Configuration, steering

DEMAND_FIELDS = [
    "t_s",  # when the demand was taken (the reconfiguration it led to is requested then)
    "src_rack",
    "dst_rack",
    "sent_bytes",  # counted since the last sample
    "measured_bytes",  # the measured demand (`ocs.measured_demand`: the interval's bytes, or the backlog)
    "hinted_bytes",  # the scheduler's hint
    "demand_bytes",  # what the circuit scheduler was given (with the simulator's waiting elephants)
    "elephant",  # 1 if demand_bytes reached the elephant threshold: the matching may give the pair a circuit
    "had_circuit",  # 1 if the pair had a circuit when the demand was taken
]


def demand_rows(
    t: float,
    sent: list[list[float]],
    measured: list[list[float]],
    hints: list[list[float]],
    demand: list[list[float]],
    circuits: Configuration,
    threshold_bytes: float,
) -> list[dict]:
    """One row per rack pair the matching could act on: those whose demand reached the elephant threshold (it
    may light them) and those with a circuit (it may take theirs down). Other pairs are left out: a run has
    up to racks² of them at every interval, and none of them can change a decision."""
    served = steering(circuits)
    rows = []
    for a, row in enumerate(demand):
        for b, total in enumerate(row):
            if a != b and (total >= threshold_bytes or (a, b) in served):
                rows.append(
                    {
                        "t_s": t,
                        "src_rack": a,
                        "dst_rack": b,
                        "sent_bytes": sent[a][b],
                        "measured_bytes": measured[a][b],
                        "hinted_bytes": hints[a][b],
                        "demand_bytes": total,
                        "elephant": int(total >= threshold_bytes),
                        "had_circuit": int((a, b) in served),
                    }
                )
    return rows


def append_demand_log(path: Path, rows: list[dict]) -> None:
    """Add rows to the controller's JSON-lines log (one line each, so a crash cuts at most the last short)."""
    if rows:
        with path.open("a") as log:
            log.writelines(json.dumps(row) + "\n" for row in rows)


def read_demand_log(path: Path, t0: float) -> list[dict]:
    """The log's rows, times in seconds after t0 (the workload's start, as every result time). A line cut short
    by a crash is skipped."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and set(row) == set(DEMAND_FIELDS):
            rows.append({**row, "t_s": round(row["t_s"] - t0, 6)})
    return rows
