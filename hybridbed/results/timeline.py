"""What the network and the cluster did over a run, as tables a plot draws: when each rack pair's circuit
carried traffic and where the reconfigurations' dark time fell, how loaded each rack's EPS and OCS uplinks
were, and how many tasks ran in each phase.

Read from a run's result files only (ocs_events.csv, links.csv, tasks.csv, flows.csv), so it works the
same for emulated and simulated runs, for finished, failed and interrupted ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hybridbed.controller.events import OcsEvent, circuit_pairs
from hybridbed.results.path_accounting import lit_intervals

PHASES = ("map", "shuffle", "reduce")


@dataclass(frozen=True)
class CircuitTimeline:
    """`lit`: one row per time a rack pair's circuit carried traffic (pair "a->b", from_s, until_s);
    `dark`: one row per pair a reconfiguration gave a circuit (pair, from_s, until_s: the dark time)."""

    lit: pd.DataFrame
    dark: pd.DataFrame

    def pairs_by_time_lit(self) -> list[str]:
        """The pairs that ever had a circuit, longest-lit first."""
        if self.lit.empty:
            return []
        on = (self.lit.until_s - self.lit.from_s).groupby(self.lit.pair).sum()
        return list(on.sort_values(ascending=False, kind="stable").index)


def _pair(a: int, b: int) -> str:
    return f"{a}->{b}"


def circuit_timeline(ocs_events: pd.DataFrame, run_end_s: float) -> CircuitTimeline:
    """The circuits of ocs_events.csv; a circuit still lit at the end is drawn up to `run_end_s`."""
    events = [OcsEvent.from_csv_row(row) for row in ocs_events.to_dict("records")]
    lit = [
        (_pair(a, b), start, min(until, run_end_s))
        for (a, b), spans in lit_intervals(events).items()
        for start, until in spans
    ]
    dark = []
    for event in events:
        before = circuit_pairs(event.circuits_before)
        dark += [
            (_pair(c["src_rack"], c["dst_rack"]), event.dark_from, event.dark_until)
            for c in event.circuits_after
            if (c["src_rack"], c["dst_rack"]) not in before
        ]
    columns = ["pair", "from_s", "until_s"]
    return CircuitTimeline(pd.DataFrame(lit, columns=columns), pd.DataFrame(dark, columns=columns))


def uplink_utilisation(links: pd.DataFrame, eps_uplink_mbps: float, ocs_port_mbps: float) -> dict[str, pd.DataFrame]:
    """{"eps": ..., "ocs": ...}: for each sample of links.csv (the index, in seconds) and each rack (columns),
    the share of the rack's uplink capacity its ToR sent up since the sample before (OCS: over all its OCS
    ports); the first sample, which only opens the first interval, has none. A kind the run has no links of
    is absent."""
    if links.empty:
        return {}
    kind = links.link.str.extract(r"^tor(?P<rack>\d+)-(?P<kind>eps|ocs)")
    sent = links.assign(rack=kind.rack.astype(int), kind=kind.kind)
    utilisation = {}
    for name, rate_mbps in (("eps", eps_uplink_mbps), ("ocs", ocs_port_mbps)):
        of_kind = sent[sent.kind == name]
        if of_kind.empty:
            continue
        ports = of_kind.groupby("rack").link.nunique()
        counters = of_kind.pivot_table(index="time_s", columns="rack", values="tx_bytes", aggfunc="sum").sort_index()
        seconds = pd.Series(counters.index, index=counters.index).diff()
        bits_per_s = counters.diff().mul(8).div(seconds, axis=0)
        utilisation[name] = bits_per_s / (ports * rate_mbps * 1e6)
    return utilisation


def running_by_phase(tasks: pd.DataFrame, flows: pd.DataFrame) -> pd.DataFrame:
    """How many tasks ran in each phase (columns map, shuffle, reduce) from each time on (the index, in
    seconds): a map from its start to its end; a task with parents shuffles until its last fetch ends, then
    reduces until its end."""
    if tasks.empty:
        return pd.DataFrame(columns=list(PHASES), index=pd.Index([], name="time_s"))
    maps = tasks[tasks.kind == "map"]
    others = with_fetched_s(tasks[tasks.kind != "map"], flows)
    fetched_s = others.fetched_s
    steps = pd.concat(
        [
            pd.DataFrame({"time_s": maps.start_s, "phase": "map", "change": 1}),
            pd.DataFrame({"time_s": maps.finish_s, "phase": "map", "change": -1}),
            pd.DataFrame({"time_s": others.start_s, "phase": "shuffle", "change": 1}),
            pd.DataFrame({"time_s": fetched_s, "phase": "shuffle", "change": -1}),
            pd.DataFrame({"time_s": fetched_s, "phase": "reduce", "change": 1}),
            pd.DataFrame({"time_s": others.finish_s, "phase": "reduce", "change": -1}),
        ]
    )
    changes = steps.pivot_table(index="time_s", columns="phase", values="change", aggfunc="sum", fill_value=0)
    return changes.reindex(columns=list(PHASES), fill_value=0).sort_index().cumsum()


def with_fetched_s(reducers: pd.DataFrame, flows: pd.DataFrame) -> pd.DataFrame:
    """Task attempts that fetch from parents, each with `fetched_s`: when its last fetch ended, within its start
    and finish (its start if it fetched nothing)."""
    shuffle = flows[flows.kind == "shuffle"] if "kind" in flows else flows
    fetched = (
        shuffle.groupby(["task_id", "attempt"]).end_s.max()
        if not shuffle.empty
        else pd.Series(dtype=float, index=pd.MultiIndex.from_tuples([], names=["task_id", "attempt"]))
    )
    reducers = reducers.join(fetched.rename("fetched_s"), on=["task_id", "attempt"])
    return reducers.assign(
        fetched_s=reducers.fetched_s.fillna(reducers.start_s).clip(lower=reducers.start_s, upper=reducers.finish_s)
    )


def run_end_s(tasks: pd.DataFrame, links: pd.DataFrame, ocs_events: pd.DataFrame) -> float:
    """The last moment any of the run's tables speaks of."""
    ends = [
        frame[column].max()
        for frame, column in ((tasks, "finish_s"), (links, "time_s"), (ocs_events, "done_s"))
        if not frame.empty
    ]
    return float(max(ends, default=0.0))
