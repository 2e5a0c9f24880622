"""A run's results directory read back as pandas DataFrames, for notebooks and scripts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

TABLES = (
    "jobs",
    "tasks",
    "flows",
    "links",
    "ocs_events",
    "ocs_demand",
    "preemptions",
    "allocation",
    "usage",
    "plan",
    "fidelity",
)


@dataclass
class RunResults:
    """One run: summary.json and the CSV tables read (a table the run did not write is empty)."""

    path: Path
    summary: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def __getattr__(self, name: str) -> pd.DataFrame:
        """`results.jobs`, `results.flows`, ...: the table of that name."""
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        if name in TABLES:
            raise AttributeError(f"table {name!r} was not read; read: {', '.join(tables) or 'none'}")
        raise AttributeError(f"no table {name!r}; tables: {', '.join(TABLES)}")


def read_json(path: Path) -> dict:
    """One of a run's JSON files (summary, scenario, environment), or {} when it is missing or was cut short
    by a crash: listings and reports go on with what there is."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def load(path: Path | str, columns: Mapping[str, Sequence[str] | None] | None = None) -> RunResults:
    """The run in results directory `path` (of `hybridbed run`, or one setup of a comparison). `columns`: the
    tables to read, each with the columns to read (None: all of them); default, every table whole. A
    paper-scale run's flows.csv has millions of rows, some gigabytes in memory when read whole."""
    path = Path(path)
    summary_path = path / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{path} holds no summary.json: not a run's results directory")
    wanted = columns if columns is not None else dict.fromkeys(TABLES)
    if unknown := sorted(set(wanted) - set(TABLES)):
        raise ValueError(f"no table {', '.join(unknown)}; tables: {', '.join(TABLES)}")
    tables = {name: read_table(path / f"{name}.csv", wanted[name]) for name in TABLES if name in wanted}
    return RunResults(path, json.loads(summary_path.read_text()), tables)


def read_table(csv: Path, columns: Sequence[str] | None = None, dtype: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One of a run's CSV tables, only `columns` if given, with these `dtype`s (empty when the run did not write
    it)."""
    if not csv.is_file() or not csv.stat().st_size:
        return pd.DataFrame()
    return pd.read_csv(csv, usecols=columns, dtype=dtype)
