"""Parameter sweeps: a grid of scenario fields, times setups, times seeds, each point one run of the scenario.

Points run on a local process pool (simulation), one at a time in this process (emulation: each run needs the
machine's CPUs, and its network is built and torn down here), or on a Dask cluster through its
concurrent.futures executor, so the pool and Dask share one code path. Every run writes its usual results
directory under `<out>/runs/<point>`; the sweep keeps one tidy table, `sweep.csv` (a row per run), rewritten
after every finished point, so a sweep that is stopped keeps what it finished. Run again with the same `--out`,
it skips the points whose run is done and runs the rest; a point whose run did not finish is run again, its
partial results moved to `<out>/incomplete/`.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from hybridbed.config.scenario import Scenario, apply_overrides, read_yaml_mapping
from hybridbed.config.validation import SpecError, parse_spec
from hybridbed.experiments.backends import run_to_summary
from hybridbed.experiments.comparison import COLUMNS, add_relative_columns, default_setups, result_row, setup_scenario
from hybridbed.experiments.process_pool import POOL_WORKER_LOST, WorkerLost, as_runs_end, check_workers, process_pool
from hybridbed.experiments.scenarios import available_setups, validate_scenario
from hybridbed.results.sweep_plots import plot_sweep

SWEEP_FILE = "sweep.json"
TABLE_FILE = "sweep.csv"
RESERVED_FIELDS = {"seed": "seeds", "scheduler.policy": "setups (or --policies)", "backend": "--backend"}
DASK_CONNECT_TIMEOUT_S = 10


class SweepGrid(BaseModel):
    """A sweep's grid file: the fields swept and their values, and optionally the setups, seeds and plotted
    measures (defaults: the scenario's comparison setups, its seed, makespan and median JCT)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fields: dict[str, list] = Field(
        default_factory=dict, description='scenario field path -> values, e.g. {"ocs.reconfig_interval_s": [0.1, 1]}'
    )
    setups: list[str] | None = Field(None, min_length=1, description="setups each point runs (default: compare's)")
    seeds: list[int] | None = Field(None, min_length=1, description="workload seeds (default: the scenario's)")
    plot: list[str] = Field(["makespan_s", "jct_median_s"], min_length=1, description="measures plotted per field")

    @field_validator("fields")
    @classmethod
    def _fields_sweepable(cls, fields: dict[str, list]) -> dict[str, list]:
        for name, values in fields.items():
            if name in RESERVED_FIELDS:
                raise ValueError(f"{name} is not swept as a field; give it as {RESERVED_FIELDS[name]}")
            if not values:
                raise ValueError(f"{name}: give at least one value")
            if len({json.dumps(v, sort_keys=True) for v in values}) < len(values):
                raise ValueError(f"{name}: a value is given twice ({values})")
        return fields

    @field_validator("plot")
    @classmethod
    def _plot_known(cls, measures: list[str]) -> list[str]:
        if unknown := [m for m in measures if m not in COLUMNS[1:]]:
            raise ValueError(f"unknown measure {', '.join(unknown)}; known: {', '.join(COLUMNS[1:])}")
        return measures


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep: a setup, a seed and a value for every swept field."""

    setup: str
    seed: int
    values: tuple[tuple[str, object], ...]

    @property
    def name(self) -> str:
        """The point's directory name: readable setup and seed, and a digest of its field values, stable
        across invocations so that a re-run finds the point's earlier run."""
        if not self.values:
            return f"{self.setup}-seed{self.seed}"
        digest = hashlib.sha1(json.dumps(self.values, sort_keys=True).encode()).hexdigest()[:10]
        return f"{self.setup}-seed{self.seed}-{digest}"

    def overrides(self) -> dict:
        return {**dict(self.values), "seed": self.seed}

    def row(self, result: dict) -> dict:
        """The point's row of sweep.csv: its name, setup, seed and field values, then the run's measures."""
        measures = {k: v for k, v in result.items() if k != "setup"}
        return {"point": self.name, "setup": self.setup, "seed": self.seed, **dict(self.values), **measures}


@dataclass(frozen=True)
class Sweep:
    """A scenario's fields (as read from its file, before validation) and the points of a grid over them."""

    name: str
    scenario_data: dict
    grid: SweepGrid
    points: tuple[SweepPoint, ...]
    baseline: str
    backend: str


def read_grid(path: Path) -> SweepGrid:
    """A grid file, validated; every problem is a SpecError naming the file and the field."""
    return parse_spec(SweepGrid, read_yaml_mapping(path, "grid"), prefix=str(path))


def point_scenario(scenario_data: dict, point: SweepPoint) -> Scenario:
    """The scenario as this point runs it: the grid's values and seed set, then the setup applied."""
    data = copy.deepcopy(scenario_data)
    apply_overrides(data, point.overrides())
    return setup_scenario(validate_scenario(data), point.setup)


def plan_sweep(scenario_data: dict, grid: SweepGrid, setups: list[str] | None, seeds: list[int] | None) -> Sweep:
    """Every point of the grid (setups x seeds x field values), each point's scenario validated before any runs,
    so a bad value is reported by field and point with nothing started. `setups`/`seeds` override the grid's."""
    base = validate_scenario(copy.deepcopy(scenario_data))
    setups = setups or grid.setups or default_setups(base)
    if unknown := [s for s in setups if s not in available_setups()]:
        raise SpecError(f"setups: unknown {', '.join(unknown)}; available: {', '.join(available_setups())}")
    seeds = seeds or grid.seeds or [base.seed]
    combinations = itertools.product(*grid.fields.values())
    points = tuple(
        SweepPoint(setup, seed, tuple(zip(grid.fields, values, strict=True)))
        for values in combinations
        for setup in setups
        for seed in seeds
    )
    problems = []
    for point in points:
        try:
            point_scenario(scenario_data, point)
        except SpecError as err:
            problems.append(f"{dict(point.values) or point.setup}: {err}")
    if problems:
        raise SpecError("; ".join(dict.fromkeys(problems)))
    return Sweep(base.name, scenario_data, grid, points, base.compare_baseline, base.backend)


def run_point(scenario_data: dict, point: SweepPoint, run_dir: str) -> dict:
    """Run one point into run_dir and return its sweep.csv row; a failed run gives a row saying so. Runs in a
    pool's or a Dask worker's process, so it takes and returns plain data."""
    return point.row(result_row(point.setup, run_to_summary(point_scenario(scenario_data, point), Path(run_dir))))


def _done_row(point: SweepPoint, run_dir: Path) -> dict | None:
    """The row of a point whose run finished in an earlier invocation, else None."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return point.row(result_row(point.setup, summary)) if summary.get("status") == "done" else None


def _set_aside(run_dir: Path, out_dir: Path) -> None:
    """Move an unfinished run's directory out of the way, keeping what it wrote."""
    incomplete = out_dir / "incomplete"
    incomplete.mkdir(exist_ok=True)
    for n in itertools.count(1):
        target = incomplete / f"{run_dir.name}-{n}"
        if not target.exists():
            run_dir.rename(target)
            return


def _begin(sweep: Sweep, out_dir: Path) -> None:
    """Create out_dir with sweep.json, or check that an existing one holds a sweep of the same scenario."""
    record = {
        "scenario": sweep.scenario_data,
        "grid": sweep.grid.model_dump(),
        "backend": sweep.backend,
        "points": len(sweep.points),
    }
    marker = out_dir / SWEEP_FILE
    if marker.is_file():
        earlier = json.loads(marker.read_text())
        if earlier.get("scenario") != sweep.scenario_data:
            raise SpecError(f"--out: {out_dir} holds a sweep of another scenario; give a new directory")
    elif out_dir.exists() and any(out_dir.iterdir()):
        raise SpecError(f"--out: {out_dir} exists and holds no sweep; give a new directory")
    (out_dir / "runs").mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(record, indent=2, default=str))


def sweep_table(sweep: Sweep, rows: dict[str, dict]) -> pd.DataFrame:
    """sweep.csv's table: a row per finished point in grid order, with each run's makespan and median JCT over
    its baseline setup's at the same field values and seed."""
    ordered = [rows[p.name] for p in sweep.points if p.name in rows]
    fields = list(sweep.grid.fields)
    columns = ["point", "setup", "seed", *fields, *COLUMNS[1:]]
    table = pd.DataFrame(ordered, columns=columns)
    if table.empty:
        return table
    group = ["seed", *fields]
    keyed = table.assign(**{f: table[f].map(lambda v: json.dumps(v, sort_keys=True)) for f in fields})
    relative = add_relative_columns(keyed, sweep.baseline, group)
    for column in ("makespan_vs_baseline", "jct_median_vs_baseline"):
        table[column] = relative[column].to_numpy()
    return table


def _write_table(table: pd.DataFrame, out_dir: Path) -> None:
    """Replace sweep.csv whole, so a reader never sees half a table."""
    partial = out_dir / f".{TABLE_FILE}.partial"
    table.to_csv(partial, index=False)
    partial.replace(out_dir / TABLE_FILE)


@contextmanager
def _dask_executor(address: str) -> Iterator[tuple[Executor, tuple[type[BaseException], ...]]]:
    """An executor on the Dask scheduler at `address`, and the errors by which its futures tell a worker lost."""
    try:
        from distributed import Client, KilledWorker
        from distributed.comm import CommClosedError
    except ImportError:
        raise SpecError("--dask needs the distributed package: pip install 'hybridbed[dask]'") from None
    try:
        client = Client(address, timeout=DASK_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as err:
        raise SpecError(f"--dask: cannot reach a Dask scheduler at {address}: {err}") from None
    with client:
        yield client.get_executor(), (KilledWorker, CommClosedError)


def _run_on(
    executor: Executor, sweep: Sweep, todo: list[SweepPoint], runs: Path, lost: tuple[type[BaseException], ...]
) -> Iterator[tuple[SweepPoint, dict]]:
    """Submit every point, yield each row as its run ends (in any order); a worker that dies (`lost`) fails its
    point and the sweep goes on."""
    futures = {executor.submit(run_point, sweep.scenario_data, p, str(runs / p.name)): p for p in todo}
    for point, row in as_runs_end(futures, lost):
        yield point, point.row(result_row(point.setup, {"status": row.status})) if isinstance(row, WorkerLost) else row


def _run_here(sweep: Sweep, todo: list[SweepPoint], runs: Path) -> Iterator[tuple[SweepPoint, dict]]:
    for point in todo:
        yield point, run_point(sweep.scenario_data, point, str(runs / point.name))


def validate_execution(sweep: Sweep, workers: int, dask: str | None) -> None:
    check_workers(workers, sweep.backend)
    if sweep.backend == "emulation" and dask:
        raise SpecError(
            "--dask: an emulated sweep runs its points one at a time on this machine (each emulation needs its "
            "CPUs and builds its network here); use the simulation backend to run points on Dask"
        )


def run_sweep(
    sweep: Sweep,
    out_dir: Path,
    workers: int = 1,
    dask: str | None = None,
    on_point: Callable[[int, int, SweepPoint | None], None] | None = None,
) -> pd.DataFrame:
    """Run the sweep's unfinished points into out_dir (in this process when workers is 1, else on a process
    pool of `workers`, or on the Dask scheduler at `dask`), keeping sweep.csv current after every point; then
    plot every swept field. `on_point(done, total, point)` is told of every finished point (None at the start).
    Returns sweep.csv's table."""
    validate_execution(sweep, workers, dask)
    _begin(sweep, out_dir)
    runs = out_dir / "runs"
    rows: dict[str, dict] = {}
    todo = []
    for point in sweep.points:
        if (row := _done_row(point, runs / point.name)) is not None:
            rows[point.name] = row
        else:
            if (runs / point.name).exists():
                _set_aside(runs / point.name, out_dir)
            todo.append(point)
    total = len(sweep.points)
    if on_point:
        on_point(len(rows), total, None)
    try:
        with _execution(sweep, todo, runs, workers, dask) as finished:
            for point, row in finished:
                rows[point.name] = row
                _write_table(sweep_table(sweep, rows), out_dir)
                if on_point:
                    on_point(len(rows), total, point)
    finally:
        table = sweep_table(sweep, rows)
        _write_table(table, out_dir)
    plot_sweep(table, sweep.grid.fields, sweep.grid.plot, out_dir)
    return table


@contextmanager
def _execution(
    sweep: Sweep, todo: list[SweepPoint], runs: Path, workers: int, dask: str | None
) -> Iterator[Iterator[tuple[SweepPoint, dict]]]:
    """Where the points run: on Dask, on a process pool, or here one after another."""
    if dask:
        with _dask_executor(dask) as (executor, lost):
            yield _run_on(executor, sweep, todo, runs, lost)
    elif workers > 1 and len(todo) > 1:
        with process_pool(min(workers, len(todo))) as pool:
            yield _run_on(pool, sweep, todo, runs, POOL_WORKER_LOST)
    else:
        yield _run_here(sweep, todo, runs)
