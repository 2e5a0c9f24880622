"""Which path a run's bytes took: the exact EPS/OCS split from the ToR uplink counters, and per flow the bytes
that came while its circuit was lit, from the fetch's notes of what it had received (a flow between racks a
and b rode the OCS while circuit a->b was lit).

Which flows may ride a lit circuit depends on the steering mode: all of them (`all`), the shuffle
connections of elephant aggregates, which the workers mark (`elephant`), or none of the workers' (`marked`:
only what a sender such as a probe marks).
"""

from __future__ import annotations

import pandas as pd

from hybridbed.controller.events import OcsEvent, circuit_pairs

LIT_FULLY = 0.99
LIT_NEVER = 0.01


def uplink_bytes(links: pd.DataFrame) -> tuple[int, int]:
    """(EPS, OCS) bytes the ToRs sent up during the run, from the first and last counter samples."""
    if links.empty:
        return 0, 0
    per_link = links.groupby("link")["tx_bytes"].agg(lambda s: int(s.iloc[-1] - s.iloc[0]))
    eps = int(per_link[per_link.index.str.endswith("-eps")].sum())
    ocs = int(per_link[per_link.index.str.contains("-ocs")].sum())
    return eps, ocs


def lit_intervals(events: list[OcsEvent]) -> dict[tuple[int, int], list[tuple[float, float]]]:
    """For each rack pair, the (from, until) times its circuit carried traffic."""
    lit: dict[tuple[int, int], float] = {}
    intervals: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for event in sorted(events, key=lambda e: e.seq):
        before, after = circuit_pairs(event.circuits_before), circuit_pairs(event.circuits_after)
        for pair in before - after:
            if pair in lit:
                intervals.setdefault(pair, []).append((lit.pop(pair), event.dark_from))
        for pair in after - before:
            lit[pair] = event.dark_until
    for pair, since in lit.items():
        intervals.setdefault(pair, []).append((since, float("inf")))
    return intervals


def received_column(notes: list[tuple[float, int]], start: float) -> str:
    """A fetch's notes of the bytes it had received, (unix time, bytes so far), as flows.csv's `received`:
    `seconds after the flow's start:bytes`, space-separated."""
    return " ".join(f"{t - start:.3f}:{b}" for t, b in notes)


def _notes(column: str, start: float) -> list[tuple[float, int]]:
    """`received_column`'s notes back, with times `start` + the seconds noted."""
    return [(start + float(t), int(b)) for t, _, b in (note.partition(":") for note in column.split())]


def _lit_time(spans: list[tuple[float, float]], start: float, end: float) -> float:
    """How long within [start, end] a circuit with these lit spans was lit."""
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in spans)


def ocs_bytes_received(notes: list[tuple[float, int]], start: float, spans: list[tuple[float, float]]) -> float:
    """Of the bytes a fetch received, those that came while its rack pair's circuit was lit: the bytes between
    two consecutive notes count in proportion to the part of that stretch the circuit was lit. A connection
    runs at its circuit's rate while lit and at its share of the EPS while dark (the two differ up to tenfold),
    so spreading its bytes evenly over its life would undercount the circuit's; notes RECEIVED_SAMPLE_S apart
    (workers/fetch.py) bound the error to the bytes of one such stretch at each lit spell's ends. What remains
    leans towards the circuit: bytes sent over the EPS just before a circuit lit are still queued there, and TCP
    hands them over (and they are counted) after (docs/reproductions.md measures it against the counters)."""
    ocs = 0.0
    since, had = start, 0
    for at, received in notes:
        if received > had:
            if at > since:
                ocs += (received - had) * _lit_time(spans, since, at) / (at - since)
            elif any(a <= at < b for a, b in spans):
                ocs += received - had
        since, had = at, received
    return ocs


def path_by_ocs_share(share: float) -> str:
    """`ocs`, `eps` or `mixed` for a flow between racks that sent this share of its bytes over a circuit."""
    return "ocs" if share >= LIT_FULLY else "eps" if share <= LIT_NEVER else "mixed"


def annotate_flows(flows: pd.DataFrame, events: list[OcsEvent], t0: float, steering: str = "all") -> pd.DataFrame:
    """flows.csv with `path` and `ocs_bytes` columns, read off each flow's `received` notes against the circuit
    timeline; flow times are seconds after t0 (unix), event times unix. Only flows the steering mode lets onto
    a circuit count (the simulator counts every flow's circuit bytes as it moves them)."""
    intervals = lit_intervals(events)
    paths, ocs_bytes = [], []
    for r in flows.itertuples():
        steered = steering == "all" or (steering == "elephant" and bool(r.elephant))
        ocs = 0.0
        if steered and r.src_rack != r.dst_rack:
            start = t0 + r.start_s
            ocs = ocs_bytes_received(_notes(r.received, start), start, intervals.get((r.src_rack, r.dst_rack), []))
        paths.append("rack" if r.src_rack == r.dst_rack else path_by_ocs_share(ocs / r.bytes if r.bytes else 0.0))
        ocs_bytes.append(round(ocs))
    return flows.assign(path=paths, ocs_bytes=ocs_bytes)
