"""Finding past runs, comparisons and sweeps under a results directory, newest first, so that nobody lists it by
hand.

A run is a directory with summary.json (and scenario.json); a comparison is one with comparison.csv, whose
setups are runs in its subdirectories; a sweep is one with sweep.json, whose runs are under its runs/ (and
incomplete/). A comparison's or a sweep's runs are listed with it rather than on their own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from hybridbed.results.load import read_json


@dataclass(frozen=True)
class ResultEntry:
    kind: str  # "run", "comparison" or "sweep"
    path: str
    scenario: str
    backend: str
    setups: list[str]
    status: str  # "done" when every setup is; else what went wrong first
    makespans_s: dict[str, float | None]  # a sweep's: each setup's mean over its finished runs
    verdicts: dict[str, str | None]  # each emulated setup's fidelity verdict (None: simulated, or not recorded)
    finished_unix: float  # when its summary or comparison was written

    def as_dict(self) -> dict:
        return asdict(self)


def _run(directory: Path) -> ResultEntry:
    summary = read_json(directory / "summary.json")
    scenario = read_json(directory / "scenario.json")
    policy = (scenario.get("scheduler") or {}).get("policy", "?")
    return ResultEntry(
        "run",
        str(directory),
        scenario.get("name", "?"),
        summary.get("backend", scenario.get("backend", "?")),
        [policy],
        str(summary.get("status", "?")),
        {policy: summary.get("makespan_s")},
        {policy: (summary.get("fidelity") or {}).get("verdict")},
        (directory / "summary.json").stat().st_mtime,
    )


def _comparison(directory: Path) -> ResultEntry:
    table = pd.read_csv(directory / "comparison.csv")
    setups = [str(s) for s in table["setup"]]
    statuses = [str(s) for s in table["status"]]
    first_run = next((directory / s for s in setups if (directory / s / "scenario.json").exists()), None)
    scenario = read_json(first_run / "scenario.json") if first_run else {}
    makespans = {s: (None if pd.isna(m) else float(m)) for s, m in zip(setups, table["makespan_s"])}
    return ResultEntry(
        "comparison",
        str(directory),
        scenario.get("name", "?"),
        scenario.get("backend", "?"),
        setups,
        next((s for s in statuses if s != "done"), "done"),
        makespans,
        {s: (read_json(directory / s / "summary.json").get("fidelity") or {}).get("verdict") for s in setups},
        (directory / "comparison.csv").stat().st_mtime,
    )


def _sweep(directory: Path) -> ResultEntry:
    record = read_json(directory / "sweep.json")
    scenario = record.get("scenario") or {}
    table_file = directory / "sweep.csv"
    table = pd.read_csv(table_file) if table_file.is_file() else pd.DataFrame(columns=["setup", "status", "makespan_s"])
    done = table[table["status"] == "done"]
    planned = record.get("points", len(table))
    status = "done" if len(done) == len(table) == planned else f"{len(done)} of {planned} runs done"
    makespans = {str(s): float(m) for s, m in done.groupby("setup", sort=False)["makespan_s"].mean().items()}
    return ResultEntry(
        "sweep",
        str(directory),
        scenario.get("name", "?"),
        record.get("backend", scenario.get("backend", "?")),
        [str(s) for s in table["setup"].unique()],
        status,
        makespans,
        {},
        (table_file if table_file.is_file() else directory / "sweep.json").stat().st_mtime,
    )


def find_results(root: Path) -> list[ResultEntry]:
    """Every run, comparison and sweep under `root` (none if it does not exist), newest first."""
    if not root.is_dir():
        return []
    comparisons = {p.parent for p in root.rglob("comparison.csv")}
    sweeps = {p.parent for p in root.rglob("sweep.json")}
    entries = [_comparison(d) for d in comparisons] + [_sweep(d) for d in sweeps]
    for summary in root.rglob("summary.json"):
        run = summary.parent
        if run.parent not in comparisons and run.parent.parent not in sweeps:
            entries.append(_run(run))
    return sorted(entries, key=lambda e: e.finished_unix, reverse=True)
