"""A run's results directory read back as pandas DataFrames, for notebooks and scripts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

TABLES = ("jobs", "tasks", "flows", "links", "ocs_events", "preemptions", "allocation", "usage", "plan", "fidelity")


@dataclass
class RunResults:
    """One run: summary.json and every CSV table it wrote (a table the run did not write is empty)."""

    path: Path
    summary: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def __getattr__(self, name: str) -> pd.DataFrame:
        """`results.jobs`, `results.flows`, ...: the table of that name."""
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(f"no table {name!r}; tables: {', '.join(TABLES)}")


def read_json(path: Path) -> dict:
    """One of a run's JSON files (summary, scenario, environment), or {} when it is missing or was cut short
    by a crash: listings and reports go on with what there is."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def load(path: Path | str) -> RunResults:
    """The run in results directory `path` (of `hybridbed run`, or one setup of a comparison)."""
    path = Path(path)
    summary_path = path / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{path} holds no summary.json: not a run's results directory")
    tables = {}
    for name in TABLES:
        csv = path / f"{name}.csv"
        tables[name] = pd.read_csv(csv) if csv.is_file() and csv.stat().st_size else pd.DataFrame()
    return RunResults(path, json.loads(summary_path.read_text()), tables)
