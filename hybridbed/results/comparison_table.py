"""A comparison as a person reads it: one row per measure (its full name and unit), one column per setup, and
beside each time the ratio to the baseline setup. It fits 80 columns for the papers' four setups, and is
written next to comparison.csv (one row per setup, every column, for programs) as comparison_table.csv and
comparison_table.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Measure:
    column: str  # in comparison.csv
    label: str  # at most 26 characters, with its unit; "{unit}" where the unit follows the values (bytes)
    kind: str  # "ratio s" (seconds, with the ratio to the baseline), "s", "share", "bytes" or "count"


MEASURES = [
    Measure("makespan_s", "makespan s (x base)", "ratio s"),
    Measure("jct_median_s", "median JCT s (x base)", "ratio s"),
    Measure("jct_mean_s", "mean JCT s (x base)", "ratio s"),
    Measure("jct_p95_s", "p95 JCT s (x base)", "ratio s"),
    Measure("jct_median_recurring_s", "median JCT recurring s", "s"),
    Measure("jct_median_adhoc_s", "median JCT ad hoc s", "s"),
    Measure("plan_makespan_s", "planned makespan s", "s"),
    Measure("plan_jct_median_s", "planned median JCT s", "s"),
    Measure("shuffle_ocs_share", "x-rack shuffle on OCS", "share"),
    Measure("all_traffic_ocs_share", "uplink bytes on OCS", "share"),
    Measure("cross_rack_shuffle_bytes", "x-rack shuffle {unit}", "bytes"),
    Measure("intra_rack_shuffle_bytes", "in-rack shuffle {unit}", "bytes"),
    Measure("cross_rack_input_bytes", "x-rack input reads {unit}", "bytes"),
    Measure("elephant_aggregates", "elephant aggregates", "count"),
    Measure("reconfigurations", "OCS reconfigurations", "count"),
    Measure("elephant_wait_median_s", "median elephant wait s", "s"),
    Measure("elephant_wait_max_s", "longest elephant wait s", "s"),
    Measure("shuffle_read_timeouts", "fetch read timeouts", "count"),
    Measure("preemptions", "preemptions", "count"),
    Measure("share_changes", "share changes", "count"),
    Measure("disorders", "order violations", "count"),
    Measure("job_wait_mean_s", "mean job wait s", "s"),
    Measure("plan_wait_mean_s", "planned mean job wait s", "s"),
    Measure("deadlines_met", "deadlines met", "count"),
    Measure("deadline_throughput_per_min", "deadlines met / min", "share"),
    Measure("cores_allocated_mean", "share of cores allocated", "share"),
    Measure("jobs_done", "jobs done", "count"),
    Measure("tcp_timer_silence_share", "TCP timer silence share", "share"),
]
# What the table's terms mean, each told only where a row label has the term.
LEGEND = (
    ("x base", "x base: ratio to the baseline setup ({baseline})."),
    ("x-rack", "x-rack: between racks."),
    ("planned", "planned: what the policy's offline plan (plan.csv) predicted for the jobs it planned."),
    ("on OCS", "on OCS: share of the bytes that rode a circuit."),
    ("elephant aggregates", "elephant aggregates: (job, rack pair) shuffles at or above the elephant threshold."),
    ("elephant wait", "elephant wait: a rack pair's elephants held back until its circuit lit (ocs.elephants_wait)."),
    (
        "fetch read timeouts",
        "fetch read timeouts: connections held back so long that they broke at Hadoop's shuffle read timeout.",
    ),
    ("order violations", "order violations: DAG stages started before their parents were done."),
    (
        "TCP timer silence",
        "TCP timer silence: of the connections' time, the share spent waiting for a retransmission timer "
        "(--capture-packets; docs/network.md).",
    ),
    (
        "fidelity verdict",
        "fidelity verdict: whether the emulation carried the network as configured (ok, warn, invalid: not a "
        "result; docs/network.md).",
    ),
)
BYTE_UNITS = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")]


def _known(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _byte_unit(values: list[float]) -> tuple[float, str]:
    largest = max((abs(v) for v in values), default=0.0)
    return next(((size, unit) for size, unit in BYTE_UNITS if largest >= size), BYTE_UNITS[-1])


def comparison_table(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Measures as rows, setups as columns, formatted; measures no setup has a value for (or only zeros) are left
    out. `table` is comparison.csv's content; the ratios are to `baseline`'s row, when it ran."""
    by_setup = table.set_index("setup")
    rows: dict[str, list[str]] = {"status": [str(s) if str(s) == "done" else str(s)[:40] for s in by_setup.status]}
    if "fidelity" in by_setup and any(isinstance(v, str) for v in by_setup.fidelity):
        rows["fidelity verdict"] = [v if isinstance(v, str) else "-" for v in by_setup.fidelity]
    for m in MEASURES:
        if m.column not in by_setup:
            continue
        values = by_setup[m.column].tolist()
        if not any(_known(v) and v != 0 for v in values):
            continue
        label = m.label
        if m.kind == "bytes":
            size, unit = _byte_unit([v for v in values if _known(v)])
            label = m.label.format(unit=unit)
            cells = [f"{v / size:.3g}" if _known(v) else "-" for v in values]
        elif m.kind == "count":
            cells = [f"{v:.0f}" if _known(v) else "-" for v in values]
        elif m.kind == "share":
            cells = [f"{v:.2f}" if _known(v) else "-" for v in values]
        else:
            base = by_setup[m.column].get(baseline) if m.kind == "ratio s" else None
            cells = [_seconds(v, base) for v in values]
        rows[label] = cells
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(by_setup.index))


def legend(view: pd.DataFrame, baseline: str) -> str:
    """What the terms of the table's rows mean (`view` as `comparison_table` makes it)."""
    labels = [str(label) for label in view.index]
    return " ".join(text.format(baseline=baseline) for term, text in LEGEND if any(term in label for label in labels))


def _seconds(value: float | None, base: float | None) -> str:
    if value is None or not _known(value):
        return "-"
    if base is not None and _known(base) and base:
        return f"{value:.1f} x{value / base:.2f}"
    return f"{value:.1f}"


def fidelity_notes(table: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(setup, verdict, reasons) of every setup whose emulated run was not judged `ok`."""
    if "fidelity" not in table:
        return []
    return [
        (str(row.setup), row.fidelity, str(row.fidelity_reasons or ""))
        for row in table.itertuples()
        if isinstance(row.fidelity, str) and row.fidelity != "ok"
    ]


def write_comparison_table(table: pd.DataFrame, baseline: str, out_dir: Path) -> pd.DataFrame:
    """comparison_table.csv and comparison_table.md in out_dir; returns the table."""
    view = comparison_table(table, baseline)
    view.to_csv(out_dir / "comparison_table.csv", index_label="measure")
    notes = "".join(f"\n- {setup}: fidelity {verdict}: {reasons}" for setup, verdict, reasons in fidelity_notes(table))
    (out_dir / "comparison_table.md").write_text(
        view.to_markdown(tablefmt="github") + "\n\n" + legend(view, baseline) + "\n" + notes + "\n"
    )
    return view


# Times within this fraction of each other rank as a tie: the emulated quickstart's makespans spread by 2 % from
# run to run (docs/reproductions.md), and online runs all end near the last arrival.
TIE_FRACTION = 0.02


def ranking(times: pd.Series, tie_fraction: float = TIE_FRACTION) -> list[list[str]]:
    """The setups (the index) fastest first, in groups of ties: each group's times within `tie_fraction` of its
    fastest."""
    groups: list[list[str]] = []
    fastest = math.nan
    for setup, time in times.sort_values(kind="stable").items():
        if groups and time <= fastest * (1 + tie_fraction):
            groups[-1].append(str(setup))
        else:
            groups.append([str(setup)])
            fastest = time
    return groups


def ranking_text(groups: list[list[str]]) -> str:
    """A ranking as `a < b = c`."""
    return " < ".join(" = ".join(group) for group in groups)


def same_ranking(a: list[list[str]], b: list[list[str]]) -> bool:
    """No two setups in opposite orders in the two rankings (a tie in either agrees with any order)."""
    place_a = {setup: i for i, group in enumerate(a) for setup in group}
    place_b = {setup: i for i, group in enumerate(b) for setup in group}
    setups = sorted(place_a.keys() & place_b.keys())
    return all(
        (place_a[x] - place_a[y]) * (place_b[x] - place_b[y]) >= 0
        for i, x in enumerate(setups)
        for y in setups[i + 1 :]
    )


def comparison_json(table: pd.DataFrame) -> str:
    """comparison.csv as one strict JSON object keyed by setup: a measure a setup has no value for (a failed
    setup's, or a share of nothing) is null, never NaN, which JSON does not have."""
    known = table.astype(object).where(table.notna(), None)
    rows = {row.pop("setup"): row for row in known.to_dict(orient="records")}
    return json.dumps(rows, indent=2, default=str, allow_nan=False)
