"""An emulated run's fidelity verdict: was the machine able to carry the network it was told to emulate?

Read from fidelity.csv (the monitor's samples) and ocs_events.csv, so a verdict can be recomputed from any
run's directory. Five things can go wrong on a small machine, and each has its thresholds here, in one
place, set from measured runs (docs/network.md, "Reading the fidelity verdict"):

- CPU: the machine runs out of CPU (Open vSwitch's userspace datapath forwards on one core). A sample
  interval counts as saturated when the machine's CPUs were more than CPU_BUSY_PCT busy on average. While
  each task was a Python process that took about 0.1 s of CPU to start, a run saturated the intervals in
  which a wave of tasks started (3-11 % of the quickstart's on this 2-core machine), and one CPU-bound
  process beside it 42-43 %. With tasks forked from each agent's launcher, four quickstart runs saturated
  none, and one CPU-bound process beside the run 1.3 %, the run as fast as alone; two saturate all.
- Links: a link whose queue stood through an interval should have sent at its configured rate. The monitor
  reads the queues every 50-150 ms and keeps each interval's smallest (`backlog_min_bytes`); files from before
  it did hold only the queues at the interval's ends, which senders bursting in step with the readings
  fooled. A queue may still drain and fill again between two readings (TCP backing off), so single
  intervals fall short on a healthy run too; the class's median is what shaping that under-delivers moves.
  A queue stands when it holds a quarter of its limit (BACKLOG_QUEUE_SHARE): a few frames, left by the
  bursts of paced or slow senders on a link they do not fill, drain in milliseconds, and counting those
  judged healthy runs' links as under-delivering.
- Datapath: packets a switch port received that no port sent and no shaped queue dropped were lost inside
  the datapath, where no switch the run stands for would lose them (Open vSwitch's userspace datapath drops
  what it cannot send when its send buffer is full: 2.6-4.7 % of the packets on an all-to-all load before
  the buffer was sized to the queues, docs/network.md). What is missing beyond the queue drops is an estimate
  (see DATAPATH_LOSS_WARN_SHARE), good to a few tenths of a percent.
- Forwarding: the userspace datapath forwards every packet on one thread (Open vSwitch's main thread), which
  competes for the CPUs with everything else and may be held to a quota. An interval counts as starved when that
  thread waited for a CPU more than FORWARDING_STARVED_WAIT of it (the kernel's run delay of the thread). The
  machine's CPU use misses a datapath starved by a quota, and the losses and late circuits it causes show only
  once it is starved badly enough. Nor does it see links faster than that one thread can forward: an interval
  counts as behind when the datapath's packet sockets held DATAPATH_BEHIND_BYTES at every reading, packets
  waiting for the thread while the links' own queues stood empty.
- Circuits: the dark time of a reconfiguration (controller-measured, from sending the unsteering to the
  barriers that confirm the new circuits: an upper bound on what packets see) against the configured delay,
  and the control lag (demand sampled to new circuits forwarding, reported only). The upper quartile is
  judged: Open vSwitch's main thread, which applies flow entries and answers barriers, also forwards the
  packets, and under load it stalls now and then for 10-30 ms (packets measured it: a 41.7 ms gap at a
  10 ms delay), so a healthy run's largest one or two of its 15-20 reconfigurations, its p95, cross any
  bound set on the rest. At a 10 ms delay eleven healthy quickstart runs gave 1.31-1.51x at the upper
  quartile (1.44-1.95x at p95); with the datapath starved, 9.47x.

`ok`: nothing crossed a threshold; `warn`: usable, with the reasons stated; `invalid`: the run measured
the machine rather than the policy, and is not a result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from hybridbed.config.fabric import FRAME_BYTES, queue_packets

CPU_BUSY_PCT = 90.0  # an interval above this (all CPUs, averaged) left the emulation no headroom
# Of intervals saturated: set between healthy quickstart runs (0.026-0.107 over 25 runs of its four setups) and
# the quickstart beside one CPU-bound process (0.419, 0.427), which takes half this machine from it. Since tasks
# are forked from a launcher: healthy runs 0 (four runs), beside one such process 0.013 (as fast as alone, `ok`).
CPU_WARN_SHARE = 0.25
CPU_INVALID_SHARE = 0.50  # beside two CPU-bound processes: 1.0, and circuits came up late (3.5x at p75; 1.56x since)
LINK_WARN_MEDIAN = 0.95  # a class's median achieved / configured rate over its backlogged intervals
LINK_INVALID_MEDIAN = 0.85
MIN_BACKLOGGED_INTERVALS = 10  # fewer, and a class's rates are not judged (too little evidence)
# Of the packets switch ports received, lost inside the datapath. The count is noisy either way on healthy
# runs (-0.25 to +0.17 % measured): Open vSwitch sends a port's packets in batches, offers a packet its queue
# refused again (tc counts two drops) and frees the rest of the batch unoffered (tc counts none).
DATAPATH_LOSS_WARN_SHARE = 0.005
DATAPATH_LOSS_INVALID_SHARE = 0.02  # the send buffer at the kernel's default lost 2.6-4.7 %
# Dark time / configured delay at the upper quartile: a quarter of the reconfigurations brought their circuits
# up a whole delay late (warn) or four delays late (invalid).
DARK_P75_WARN = 2.0
DARK_P75_INVALID = 5.0
# An interval in which the forwarding thread waited for a CPU for more than this share of it: it had packets
# to forward for at least that long and forwarded none of them then.
FORWARDING_STARVED_WAIT = 0.5
# Of intervals so starved. The quickstart's four setups had none (375 intervals; the longest wait 0.15 of an
# interval), nor had its runs beside one and two CPU-bound processes (the longest 0.21 and 0.45); the GENI mixed
# scenario's F-Hybrid had 0.004 (9 of 2,538, six of them in one wave of task starts). With ovs-vswitchd held to
# 0.15 of a core, 0.57, which the other measures called `ok` while the makespan grew by 10-14 %; at 0.05, 0.65
# (docs/network.md, "Reading the fidelity verdict").
FORWARDING_STARVED_WARN_SHARE = 0.05
FORWARDING_STARVED_INVALID_SHARE = 0.25  # a quarter of the run, as the dark time's upper quartile
# An interval in which the forwarding thread ran or waited for a CPU for more than this share of it: it was busy
# nearly throughout (reported, not judged: busy is not behind; it kept up at 0.41 of the quickstart's intervals at
# 100 Mb/s hosts, docs/network.md "Past the packet ceiling").
FORWARDING_RUNNABLE_SHARE = 0.9
# An interval in which the datapath's packet sockets held at least this much at every reading of the monitor: the
# forwarding thread was behind all along, the packets waiting inside it where the links' queues do not see them.
# About 32 frames (a queued frame holds about 2 KB of socket memory, testbed/shaping.py), some milliseconds of the
# datapath's forwarding at its ceiling; a frame or two caught in passing at every reading stays below it. The
# quickstart at its 10 Mb/s hosts held nothing at every reading of any interval.
DATAPATH_BEHIND_BYTES = 64 * 1024
# Of intervals so behind: as the starved ones (a twentieth, a quarter of the run), not fitted to the runs measured.
# The quickstart at 100 Mb/s hosts had 0.11 (its JCTs summed +4 % over its run at 10 Mb/s), at 150 Mb/s 0.35
# (+8 %), at 200 Mb/s 0.59 (+28 %), which the other measures called `ok`, `ok` and `warn` (docs/network.md, "Past
# the packet ceiling").
DATAPATH_BEHIND_WARN_SHARE = FORWARDING_STARVED_WARN_SHARE
DATAPATH_BEHIND_INVALID_SHARE = FORWARDING_STARVED_INVALID_SHARE
LINK_CLASSES = ("host", "tor-eps", "tor-ocs")
# A standing queue holds at least this share of its port's limit at both ends of an interval. Set from 93
# runs' samples: healthy runs whose link class fell below LINK_INVALID_MEDIAN (the GENI scenario's 10 Mb/s
# EPS uplinks under F-EPS, 0.81; MR-POTS's paced hosts, 0.53-0.64) had those intervals' queues under a
# fifth of the limit (F-EPS) or all but 1-4 of them under a quarter (MR-POTS), while runs with the datapath
# starved keep 9-22 host-link intervals at a quarter or more, at 0.42-0.48 of the rate (docs/network.md,
# "Reading the fidelity verdict").
BACKLOG_QUEUE_SHARE = 0.25


@dataclass(frozen=True)
class Verdict:
    verdict: str  # "ok", "warn" or "invalid"
    reasons: list[str]


def _quantiles(values: pd.Series) -> dict[str, float | int | None]:
    if values.empty:
        return {"median": None, "p75": None, "p95": None, "max": None, "count": 0}
    return {
        "median": round(float(values.median()), 3),
        "p75": round(float(values.quantile(0.75)), 3),
        "p95": round(float(values.quantile(0.95)), 3),
        "max": round(float(values.max()), 3),
        "count": int(len(values)),
    }


def cpu_measures(samples: pd.DataFrame) -> dict:
    per_interval = samples.groupby("time_s").cpu_busy_pct.first() if not samples.empty else pd.Series(dtype=float)
    return {
        "intervals": int(len(per_interval)),
        "cpu_busy_share": round(float((per_interval > CPU_BUSY_PCT).mean()), 3) if len(per_interval) else None,
        "cpu_busy_worst_pct": round(float(per_interval.max()), 1) if len(per_interval) else None,
    }


def backlogged(samples: pd.DataFrame) -> pd.Series:
    """Link-intervals with a queue of at least BACKLOG_QUEUE_SHARE of the port's limit standing throughout: at
    every reading, or at both ends in files from before the monitor read the queues in between."""
    limit_bytes = samples.configured_mbps.map(queue_packets) * FRAME_BYTES
    readings = [c for c in ("backlog_start_bytes", "backlog_end_bytes", "backlog_min_bytes") if c in samples.columns]
    return samples[readings].min(axis=1) >= BACKLOG_QUEUE_SHARE * limit_bytes


def link_measures(samples: pd.DataFrame) -> dict[str, dict]:
    """Per link class, the achieved / configured ratio over backlogged link-intervals."""
    measures = {}
    for link_class in LINK_CLASSES:
        busy = samples[(samples.link_class == link_class) & backlogged(samples)] if not samples.empty else samples
        ratio = busy.achieved_mbps / busy.configured_mbps if len(busy) else pd.Series(dtype=float)
        measures[link_class] = {
            "backlogged_intervals": int(len(ratio)),
            "ratio_median": round(float(ratio.median()), 3) if len(ratio) else None,
            "ratio_p5": round(float(ratio.quantile(0.05)), 3) if len(ratio) else None,
        }
    return measures


def datapath_measures(samples: pd.DataFrame) -> dict | None:
    """Packets the switch ports received and sent, those their shaped queues dropped, and the rest: lost inside
    the datapath. None for samples from before the monitor counted packets."""
    if "received_packets" not in samples.columns:
        return None
    received, sent = int(samples.received_packets.sum()), int(samples.sent_packets.sum())
    queue_drops = int(samples.drops.sum())
    lost = max(0, received - sent - queue_drops)
    return {
        "received": received,
        "sent": sent,
        "queue_drops": queue_drops,
        "lost": lost,
        "lost_share": round(lost / received, 5) if received else None,
    }


def forwarding_measures(samples: pd.DataFrame) -> dict | None:
    """The thread that forwarded the packets, per interval: the CPU it ran on and the time it was ready to run
    with no CPU free, in seconds per second (quantiles over the intervals), the share of intervals it waited
    more than FORWARDING_STARVED_WAIT of, and the share it ran or waited more than FORWARDING_RUNNABLE_SHARE of;
    the bytes its packet sockets held at every reading (quantiles; None in files from before the monitor read
    them) and the share of intervals they held DATAPATH_BEHIND_BYTES or more. None where the thread was not
    watched (the kernel datapath, or files from before the monitor read it)."""
    if "forwarding_wait_share" not in samples.columns or samples.forwarding_wait_share.isna().all():
        return None
    columns = ["forwarding_cpu_share", "forwarding_wait_share"]
    per_interval = samples.groupby("time_s")[columns].first().dropna()
    waited = per_interval.forwarding_wait_share
    runnable = per_interval.forwarding_cpu_share + waited
    measures = {
        "cpu_share": _quantiles(per_interval.forwarding_cpu_share),
        "wait_share": _quantiles(waited),
        "starved_share": round(float((waited > FORWARDING_STARVED_WAIT).mean()), 3) if len(waited) else None,
        "runnable_share": round(float((runnable > FORWARDING_RUNNABLE_SHARE).mean()), 3) if len(waited) else None,
        "backlog_bytes": None,
        "behind_share": None,
    }
    if "forwarding_backlog_min_bytes" in samples.columns:
        backlog = samples.groupby("time_s").forwarding_backlog_min_bytes.first().dropna()
        if len(backlog):
            measures["backlog_bytes"] = _quantiles(backlog)
            measures["behind_share"] = round(float((backlog >= DATAPATH_BEHIND_BYTES).mean()), 3)
    return measures


def circuit_measures(ocs_events: pd.DataFrame) -> dict:
    """Dark time over the configured delay, for reconfigurations that lit a new circuit after a delay, and the
    control lag (demand sampled, or circuits asked for, to new circuits forwarding) in ms, for all."""
    if ocs_events.empty:
        none = _quantiles(pd.Series(dtype=float))
        return {"dark_time_ratio": none, "control_lag_ms": none}
    lit = ocs_events[ocs_events.apply(_lights_a_circuit, axis=1) & (ocs_events.configured_delay_ms > 0)]
    dark = (lit.dark_until_s - lit.dark_from_s) * 1000 / lit.configured_delay_ms
    lag = (ocs_events.dark_until_s - ocs_events.requested_s) * 1000
    return {"dark_time_ratio": _quantiles(dark), "control_lag_ms": _quantiles(lag)}


def _lights_a_circuit(event: pd.Series) -> bool:
    def pairs(circuits: str) -> set[tuple]:
        return {tuple(sorted(c.items())) for c in json.loads(circuits)}

    return bool(pairs(event.circuits_after) - pairs(event.circuits_before))


def judge(
    cpu: dict, links: dict[str, dict], circuits: dict, datapath: dict | None = None, forwarding: dict | None = None
) -> Verdict:
    """The verdict and its reasons from the measures (thresholds above)."""
    invalid: list[str] = []
    warn: list[str] = []

    def above(share: float | None, said: str, warn_at: float, invalid_at: float, limit_format: str = ".0%") -> None:
        """Name the share among the invalid or the warn reasons, with the limit it passed."""
        if share is not None and share > invalid_at:
            invalid.append(f"{said} (limit {invalid_at:{limit_format}})")
        elif share is not None and share > warn_at:
            warn.append(f"{said} (limit {warn_at:{limit_format}})")

    starved = forwarding["starved_share"] if forwarding else None
    above(
        starved,
        f"the datapath's forwarding thread waited for a CPU more than {FORWARDING_STARVED_WAIT:.0%} of the time"
        f" in {starved or 0:.0%} of intervals",
        FORWARDING_STARVED_WARN_SHARE,
        FORWARDING_STARVED_INVALID_SHARE,
    )
    behind = forwarding["behind_share"] if forwarding else None
    above(
        behind,
        f"packets waited inside the datapath ({DATAPATH_BEHIND_BYTES // 1024} KiB or more at every reading)"
        f" in {behind or 0:.0%} of intervals",
        DATAPATH_BEHIND_WARN_SHARE,
        DATAPATH_BEHIND_INVALID_SHARE,
    )
    lost = datapath["lost_share"] if datapath else None
    above(
        lost,
        f"the datapath lost {lost or 0:.2%} of the packets the switches received",
        DATAPATH_LOSS_WARN_SHARE,
        DATAPATH_LOSS_INVALID_SHARE,
        ".1%",
    )
    busy = cpu.get("cpu_busy_share")
    above(busy, f"CPUs above {CPU_BUSY_PCT:g}% busy in {busy or 0:.0%} of intervals", CPU_WARN_SHARE, CPU_INVALID_SHARE)
    for link_class, m in links.items():
        if m["backlogged_intervals"] < MIN_BACKLOGGED_INTERVALS:
            continue
        said = f"{link_class} links sent {m['ratio_median']:g} of their configured rate while backlogged (median)"
        if m["ratio_median"] < LINK_INVALID_MEDIAN:
            invalid.append(f"{said}, below {LINK_INVALID_MEDIAN:g}")
        elif m["ratio_median"] < LINK_WARN_MEDIAN:
            warn.append(f"{said}, below {LINK_WARN_MEDIAN:g}")
    dark = circuits["dark_time_ratio"]
    if dark["count"]:
        said = f"dark time {dark['p75']:g}x the configured delay at the upper quartile"
        if dark["p75"] > DARK_P75_INVALID:
            invalid.append(f"{said}, above {DARK_P75_INVALID:g}")
        elif dark["p75"] > DARK_P75_WARN:
            warn.append(f"{said}, above {DARK_P75_WARN:g}")
    if invalid:
        return Verdict("invalid", invalid + warn)
    return Verdict("warn", warn) if warn else Verdict("ok", [])


def fidelity_summary(
    samples: pd.DataFrame,
    ocs_events: pd.DataFrame,
    monitor_cpu_share: float | None,
    tcp: dict[str, int] | None = None,
    tasks: pd.DataFrame | None = None,
) -> dict:
    """summary.json's `fidelity` object. The hosts' TCP counters over the run (`tcp`, with the share of segments
    sent again) are reported, not judged: the simulator's fluid transfers lose nothing to loss recovery
    (docs/network.md). So is the time the tasks' CPU quotas held their processes back (`tasks`: tasks.csv),
    which no run has yet measured enough of to set a threshold on."""
    cpu, links, circuits = cpu_measures(samples), link_measures(samples), circuit_measures(ocs_events)
    datapath, forwarding = datapath_measures(samples), forwarding_measures(samples)
    verdict = judge(cpu, links, circuits, datapath, forwarding)
    return {
        "verdict": verdict.verdict,
        "reasons": verdict.reasons,
        **cpu,
        "links": links,
        "datapath": datapath,
        "forwarding": forwarding,
        **circuits,
        "tcp": _with_retransmitted_share(tcp) if tcp else None,
        "task_throttling": None if tasks is None else task_throttling(tasks),
        "monitor_cpu_share": None if monitor_cpu_share is None else round(monitor_cpu_share, 4),
    }


def task_throttling(tasks: pd.DataFrame) -> dict | None:
    """How long the finished tasks' CPU quotas held their processes back (tasks.csv's `throttled_s`; None where
    it was not counted), and the CPU time the processes used (`cpu_s`), in all and as the cores a task process
    used on average while it ran. Where compute is emulated by waiting, the time held back is time the modelled
    tasks do not lose: a task held to a small share (0.01 of a core is 1 ms of CPU per 100 ms) may need more
    for its own reading, pacing and fetching (docs/reproductions.md, MR-POTS)."""
    held_s = counted_total(tasks, "throttled_s")
    if held_s is None:
        return None
    throttled = tasks.throttled_s.fillna(0.0)
    task_s = float((tasks.finish_s - tasks.start_s).sum())
    cpu_s = counted_total(tasks, "cpu_s")
    return {
        "tasks": int((throttled > 0).sum()),
        "of_tasks": len(tasks),
        "seconds": round(held_s, 3),
        "max_s": round(float(throttled.max()), 3),
        "share_of_task_time": round(held_s / task_s, 4) if task_s > 0 else None,
        "cpu_s": None if cpu_s is None else round(cpu_s, 3),
        "cpu_cores_mean": None if cpu_s is None or task_s <= 0 else round(cpu_s / task_s, 4),
    }


def counted_total(tasks: pd.DataFrame, column: str) -> float | None:
    """The sum of a tasks.csv column that only the emulation fills (`cpu_s`, `throttled_s`); None where nothing
    counted it (the simulator leaves it empty, a run from before it was kept has no such column)."""
    if column not in tasks or tasks[column].isna().all():
        return None
    return float(tasks[column].sum())


def _with_retransmitted_share(tcp: dict[str, int]) -> dict:
    """The share of segments sent again: the retransmissions that left the host (the stack counts every try,
    also those its own egress queue refused)."""
    sent = tcp.get("segments_sent", 0)
    sent_again = tcp.get("retransmitted", 0) - tcp.get("retransmit_failures", 0)
    return {**tcp, "retransmitted_share": round(sent_again / sent, 4) if sent else None}
