"""Where a run's time went: each job's phases, the tasks' and transfers' own times, the circuits' lit and
dark time, the bytes on the wire per byte moved, and how busy the containers were while work waited, read
from the run's result files only.

Two runs of one scenario (emulated and simulated, or two policies) can then be set side by side measure by
measure: `bench/sim_vs_emu.py` does so to show where an emulated run loses time against its simulation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hybridbed.controller.events import OcsEvent, circuit_pairs
from hybridbed.results.fidelity import counted_total
from hybridbed.results.load import RunResults
from hybridbed.results.path_accounting import uplink_bytes
from hybridbed.results.timeline import circuit_timeline, run_end_s, with_fetched_s

JOB_PHASES = ("wait_s", "map_s", "shuffle_tail_s", "reduce_s")
# A reconfiguration asked for within this of a demand sample was decided on it (both files keep microseconds).
SAME_SAMPLE_S = 2e-6


def job_phases(run: RunResults) -> pd.DataFrame:
    """One row per finished job (index job_id): its arrival, first task start, last map end, last fetch end
    and finish, and the four phases they bound:
    - `wait_s`: arrival to the first task's start;
    - `map_s`: first task's start to the last map's end;
    - `shuffle_tail_s`: last map's end to the last fetch's end (0 when the fetches ended with the maps);
    - `reduce_s`: from then to the job's finish (the reducers' compute and write).
    Only a job's final attempts count: a task run again counts from its last start."""
    tasks = run.tasks.sort_values("attempt").drop_duplicates("task_id", keep="last")
    maps = tasks[tasks.kind == "map"]
    shuffle = run.flows[run.flows.kind == "shuffle"] if not run.flows.empty else run.flows
    times = pd.DataFrame(
        {
            "arrival_s": run.jobs.set_index("job_id").arrival_s,
            "first_start_s": tasks.groupby("job_id").start_s.min(),
            "maps_done_s": maps.groupby("job_id").finish_s.max(),
            "fetched_s": shuffle.groupby("job_id").end_s.max() if not shuffle.empty else np.nan,
            "finish_s": run.jobs.set_index("job_id").finish_s,
        }
    ).loc[run.jobs.job_id]
    maps_done = times.maps_done_s.fillna(times.first_start_s)
    fetched = times.fetched_s.fillna(maps_done).clip(lower=maps_done)
    return times.assign(
        wait_s=times.first_start_s - times.arrival_s,
        map_s=maps_done - times.first_start_s,
        shuffle_tail_s=fetched - maps_done,
        reduce_s=times.finish_s - fetched,
    )


def _task_times(run: RunResults) -> dict[str, float]:
    """Mean seconds of a map, of a reducer's shuffle (its start to its last fetch's end) and of its reduce
    (from then to its end), over finished attempts; emulated, the seconds their CPU quotas held the tasks'
    processes back, and the CPU seconds those processes used, in all."""
    tasks = run.tasks
    reducers = with_fetched_s(tasks[tasks.kind != "map"], run.flows)
    maps = tasks[tasks.kind == "map"]
    times = {
        "map task s (mean)": float((maps.finish_s - maps.start_s).mean()),
        "reducer shuffle s (mean)": float((reducers.fetched_s - reducers.start_s).mean()),
        "reducer compute s (mean)": float((reducers.finish_s - reducers.fetched_s).mean()),
    }
    for column, measure in (
        ("throttled_s", "task s held back by CPU quotas (all)"),
        ("cpu_s", "task processes' CPU s (all)"),
    ):
        if (total := counted_total(tasks, column)) is not None:
            times[measure] = total
    return times


def _transfer_rates(run: RunResults) -> dict[str, float]:
    """Per path of the shuffle connections (rack, eps, ocs, mixed): their count and their goodput in Mb/s,
    all their bytes over all their seconds (a connection's own rate while it was open)."""
    measures: dict[str, float] = {}
    flows = run.flows
    if flows.empty or "path" not in flows:
        return measures
    shuffle = flows[(flows.kind == "shuffle") & (flows.bytes > 0)]
    for path, group in shuffle.groupby("path"):
        seconds = (group.end_s - group.start_s).clip(lower=1e-6).sum()
        measures[f"{path} fetches"] = float(len(group))
        measures[f"{path} fetch Mb/s"] = float(group.bytes.sum() * 8 / seconds / 1e6)
    return measures


def _elephant_aggregates(run: RunResults) -> dict[str, float]:
    """How long each elephant aggregate (a job's marked connections from one rack to another) kept sending: from
    its first connection's start to its last one's end, the time its pair stays demand for a circuit; and, of
    aggregates of several connections, how far apart their ends fell (max-min sharing ends equal connections
    together; TCP sharing a congested link need not)."""
    flows = run.flows
    if flows.empty or "elephant" not in flows:
        return {}
    marked = flows[(flows.elephant == 1) & (flows.src_rack != flows.dst_rack)]
    if marked.empty:
        return {}
    aggregates = marked.groupby(["job_id", "src_rack", "dst_rack"]).agg(
        n=("start_s", "size"), first=("start_s", "min"), first_end=("end_s", "min"), last=("end_s", "max")
    )
    several = aggregates[aggregates.n > 1]
    return {
        "elephant aggregate s sending (mean)": float((aggregates["last"] - aggregates["first"]).mean()),
        "elephant aggregate connections' ends apart s (median)": float(
            (several["last"] - several.first_end).median() if len(several) else np.nan
        ),
    }


def _wire_overhead(run: RunResults) -> dict[str, float]:
    """Bytes the ToRs sent up (EPS and OCS) per byte the transfers between racks moved, and the OCS uplinks'
    bytes per byte the flows' accounting put on circuits: 1 in the simulator; in the emulation headers,
    acknowledgements and retransmissions add to both (with the share of TCP segments the hosts sent again,
    which the fidelity monitor counts), and the second checks the emulation's circuit accounting against the
    switches' counters (a full frame carries 1448 payload bytes in 1514: 1.046)."""
    flows = run.flows
    if flows.empty or run.links.empty:
        return {}
    between = flows[flows.src_rack != flows.dst_rack]
    eps, ocs = uplink_bytes(run.links)
    measures = {}
    if between.bytes.sum() > 0:  # (none where every transfer stays in its rack, as under Corral on GENI)
        measures["uplink bytes per byte between racks"] = float((eps + ocs) / between.bytes.sum())
    if "ocs_bytes" in between and between.ocs_bytes.sum() > 0:  # (not accounted when the scheduler died)
        measures["OCS uplink bytes per byte on circuits"] = float(ocs / between.ocs_bytes.sum())
    tcp = (run.summary.get("fidelity") or {}).get("tcp") or {}
    if tcp.get("retransmitted_share") is not None:
        measures["TCP segments retransmitted (share)"] = float(tcp["retransmitted_share"])
        for counter, value in tcp.items():  # what the run's monitor read (older runs read fewer)
            if counter not in ("segments_sent", "retransmitted", "retransmitted_share"):
                measures[f"TCP {counter.replace('_', ' ')}"] = float(value)
    return measures


def _circuit_times(run: RunResults) -> dict[str, float]:
    """Circuit-seconds lit, and dark while a new circuit came up."""
    if run.ocs_events.empty:
        return {"circuit s lit": 0.0, "circuit s dark": 0.0}
    timeline = circuit_timeline(run.ocs_events, run_end_s(run.tasks, run.links, run.ocs_events))
    return {
        "circuit s lit": float((timeline.lit.until_s - timeline.lit.from_s).sum()),
        "circuit s dark": float((timeline.dark.until_s - timeline.dark.from_s).sum()),
    }


def circuit_endings(ocs_events: pd.DataFrame, ocs_demand: pd.DataFrame) -> pd.DataFrame:
    """One row per circuit a periodic reconfiguration took down (pair "a->b", t_s: when it was asked for), with
    why, from the demand that reconfiguration matched on (ocs_demand.csv): `under_threshold` (the pair's demand
    had fallen under the elephant threshold), `sent_nothing` (under it, and the ToR counted no byte of the pair
    since the sample before: with measured demand the pair stopped sending, and a backlog starts again from
    zero; with `demand_source: hints` nothing is counted, so every ending under the threshold reads so) or
    `outmatched` (still an elephant, but the matching gave its ports to other pairs). A circuit taken down
    with no demand sample at its time (a pinned or an on-demand one) is left out."""
    columns = ["pair", "t_s", "why"]
    if ocs_events.empty or ocs_demand.empty:
        return pd.DataFrame(columns=columns)
    taken_down = [
        (event.requested, a, b)
        for event in (OcsEvent.from_csv_row(row) for row in ocs_events.to_dict("records"))
        for a, b in circuit_pairs(event.circuits_before) - circuit_pairs(event.circuits_after)
    ]
    if not taken_down:
        return pd.DataFrame(columns=columns)
    samples = pd.DataFrame({"sample_s": np.unique(ocs_demand.t_s)})
    decided_on = pd.merge_asof(
        pd.DataFrame(taken_down, columns=["t_s", "src_rack", "dst_rack"]).sort_values(["t_s", "src_rack", "dst_rack"]),
        samples,
        left_on="t_s",
        right_on="sample_s",
        direction="nearest",
        tolerance=SAME_SAMPLE_S,
    ).dropna(subset=["sample_s"])
    rows = decided_on.merge(
        ocs_demand.rename(columns={"t_s": "sample_s"}), on=["sample_s", "src_rack", "dst_rack"], how="inner"
    )
    why = np.select(
        [rows.elephant == 1, rows.sent_bytes == 0], ["outmatched", "sent_nothing"], default="under_threshold"
    )
    pairs = rows.src_rack.astype(int).astype(str) + "->" + rows.dst_rack.astype(int).astype(str)
    return pd.DataFrame({"pair": pairs, "t_s": rows.t_s, "why": why})[columns]


def _circuit_endings(run: RunResults) -> dict[str, float]:
    """How many circuits went dark, by why (`circuit_endings`); the rack-pair intervals at or above the elephant
    threshold, the demand the matching was offered."""
    if run.ocs_demand.empty:
        return {}
    endings = circuit_endings(run.ocs_events, run.ocs_demand).why.value_counts()
    return {
        "elephant pair-intervals": float(run.ocs_demand.elephant.sum()),
        "circuits taken down": float(endings.sum()),
        "taken down: pair sent nothing an interval": float(endings.get("sent_nothing", 0)),
        "taken down: demand under threshold, still sending": float(endings.get("under_threshold", 0)),
        "taken down: outmatched": float(endings.get("outmatched", 0)),
    }


def _busy_while_waiting(run: RunResults) -> dict[str, float]:
    """Time-weighted mean of the tasks running while tasks were pending (from allocation.csv): a scheduler
    that keeps its containers busy shows the cluster's slots here, one that is slow to launch fewer."""
    samples = run.allocation
    if samples.empty:
        return {}
    held = samples.time_s.diff().shift(-1).fillna(0.0)
    waiting = samples.pending_tasks > 0
    if not (held[waiting] > 0).any():
        return {}
    return {
        "tasks running while some pending (mean)": float(
            np.average(samples.running_tasks[waiting], weights=held[waiting])
        )
    }


def phase_measures(run: RunResults) -> pd.Series:
    """One run's measures of where its time went, by name (units in the names)."""
    phases = job_phases(run)
    measures: dict[str, float] = {"makespan s": float(run.summary.get("makespan_s") or np.nan)}
    for phase in JOB_PHASES:
        measures[f"job {phase.removesuffix('_s').replace('_', ' ')} s (mean)"] = float(phases[phase].mean())
    measures.update(_task_times(run))
    measures.update(_transfer_rates(run))
    measures.update(_wire_overhead(run))
    measures.update(_circuit_times(run))
    measures.update(_elephant_aggregates(run))
    measures.update(_circuit_endings(run))
    measures["reconfigurations"] = float(run.summary.get("reconfigurations") or 0)
    measures.update(_busy_while_waiting(run))
    return pd.Series(measures)


def last_job_phases(run: RunResults) -> pd.Series:
    """The phases of the job that finished last (the one that set the makespan), with its id."""
    phases = job_phases(run)
    last = phases.finish_s.idxmax()
    return pd.concat([pd.Series({"job": last}), phases.loc[last, ["arrival_s", *JOB_PHASES, "finish_s"]]])


def jobs_apart(first: RunResults, second: RunResults, count: int, names: tuple[str, str]) -> pd.DataFrame:
    """The `count` jobs whose JCT differs most between two runs of one scenario (emulated and simulated, or two
    policies), largest difference first: each run's JCT and phases side by side (columns "<measure> <name>"),
    their `jct_rank` in each run (1: the fastest) and `jct_difference_s` (second - first). A median of few jobs
    moves by a whole gap when one job passes it; these are the jobs to trace first."""
    runs = [job_phases(run) for run in (first, second)]
    jobs = runs[0].index.intersection(runs[1].index)
    side = {}
    for name, phases in zip(names, runs, strict=True):
        phases = phases.loc[jobs]
        jct = phases.finish_s - phases.arrival_s
        side[f"jct_s {name}"] = jct
        side[f"jct_rank {name}"] = jct.rank(method="first").astype(int)
        for phase in JOB_PHASES:
            side[f"{phase} {name}"] = phases[phase]
    apart = pd.DataFrame(side)
    apart["jct_difference_s"] = apart[f"jct_s {names[1]}"] - apart[f"jct_s {names[0]}"]
    order = apart.jct_difference_s.abs().sort_values(ascending=False, kind="stable").index
    return apart.loc[order[:count]]
