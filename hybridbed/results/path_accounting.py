"""Which path a run's bytes took: the exact EPS/OCS split from the ToR uplink counters, and a per-flow
path read off the circuit timeline (a flow between racks a and b rode the OCS while circuit a->b was lit).

Which flows may ride a lit circuit depends on the steering mode: all of them (`all`), the shuffle
connections of elephant aggregates, which the workers mark (`elephant`), or none of the workers' (`marked`:
only what a sender such as a probe marks).
"""

from __future__ import annotations

import pandas as pd

from hybridbed.controller.events import OcsEvent

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
        before = {(c["src_rack"], c["dst_rack"]) for c in event.circuits_before}
        after = {(c["src_rack"], c["dst_rack"]) for c in event.circuits_after}
        for pair in before - after:
            if pair in lit:
                intervals.setdefault(pair, []).append((lit.pop(pair), event.dark_from))
        for pair in after - before:
            lit[pair] = event.dark_until
    for pair, since in lit.items():
        intervals.setdefault(pair, []).append((since, float("inf")))
    return intervals


def lit_share(
    src_rack: int, dst_rack: int, start: float, end: float, intervals: dict[tuple[int, int], list[tuple[float, float]]]
) -> float:
    """The share of a flow's duration for which its racks' circuit was lit (0 inside a rack)."""
    if src_rack == dst_rack:
        return 0.0
    length = max(end - start, 1e-9)
    covered = sum(max(0.0, min(end, b) - max(start, a)) for a, b in intervals.get((src_rack, dst_rack), []))
    return min(1.0, covered / length)


def flow_path(
    src_rack: int, dst_rack: int, start: float, end: float, intervals: dict[tuple[int, int], list[tuple[float, float]]]
) -> str:
    """`rack` inside a rack; else `ocs`, `eps` or `mixed` by how much of the flow its circuit was lit."""
    if src_rack == dst_rack:
        return "rack"
    return path_by_ocs_share(lit_share(src_rack, dst_rack, start, end, intervals))


def path_by_ocs_share(share: float) -> str:
    """`ocs`, `eps` or `mixed` for a flow between racks that spent this share of itself on a circuit."""
    return "ocs" if share >= LIT_FULLY else "eps" if share <= LIT_NEVER else "mixed"


def annotate_flows(flows: pd.DataFrame, events: list[OcsEvent], t0: float, steering: str = "all") -> pd.DataFrame:
    """flows.csv with `path` and `ocs_bytes` columns; flow times are seconds after t0 (unix), event times unix.
    A flow's bytes over the OCS are estimated as its bytes times the share of its duration its circuit was lit
    (flows are paced, so their rate is about even); the simulator counts them exactly."""
    intervals = lit_intervals(events)
    paths, ocs_bytes = [], []
    for r in flows.itertuples():
        steered = steering == "all" or (steering == "elephant" and bool(r.elephant))
        share = lit_share(r.src_rack, r.dst_rack, r.start_s + t0, r.end_s + t0, intervals) if steered else 0.0
        paths.append("rack" if r.src_rack == r.dst_rack else path_by_ocs_share(share))
        ocs_bytes.append(round(r.bytes * share))
    return flows.assign(path=paths, ocs_bytes=ocs_bytes)
