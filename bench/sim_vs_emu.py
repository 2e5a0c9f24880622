"""Simulation against emulation: one scenario on both backends, the makespan of every setup side by side, and
where the emulated run's time went against the simulated one's (each job's phases, the tasks' and fetches'
own times, circuit time, how busy the containers were while work waited). Where the emulated runs captured
their packets (`--capture-packets` given to this script or to the comparison), also how much longer each
reducer's shuffle took than simulated, apart for the reducers whose connections waited for TCP's
retransmission timer and those that did not, and the connections' waits by the path they took (EPS, circuit).
Per setup, the jobs whose JCT differs most between the backends, with their phases side by side: a median of
few jobs moves by a whole gap when one job passes it, so these are the jobs to trace first.
Target: simulated / emulated makespan within 15 % for every setup, and the same ordering of setups (setups
within 2 % of each other on either backend rank as a tie). Online and mixed scenarios end with their last
arrival, so there the JCT table says more: each setup's median, mean and p95 JCT on both backends (and the
recurring and ad-hoc medians where the workload has both).

Runs the emulation, so as root (about 5 minutes for the quickstart scenario, an hour for jobpacker-geni); both
comparisons stay in --out. Given --emulated and --simulated comparison directories, it only reads them:
    .venv/bin/python bench/sim_vs_emu.py [scenario.yaml] [--policies fair,corral,jobpacker,f-eps] [--out DIR]
                                         [--capture-packets]
    .venv/bin/python bench/sim_vs_emu.py --emulated DIR --simulated DIR
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from hybridbed.experiments.comparison import compare, default_setups
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.results.comparison_table import TIE_FRACTION, ranking, ranking_text, same_ranking
from hybridbed.results.load import RunResults, load
from hybridbed.results.phases import jobs_apart, last_job_phases, phase_measures
from hybridbed.results.tcp_stalls import flow_connections, path_waits, reducer_waits
from hybridbed.results.timeline import with_fetched_s
from hybridbed.testbed.capture import CAPTURE_DIR

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
TARGET = 0.15
JOBS_APART = 5  # jobs listed per setup in the jobs-apart table
# Each setup's runs, emulated and simulated.
RunPairs = dict[str, tuple[RunResults, RunResults]]


def run_both(scenario_path: Path, setups: list[str] | None, out: Path, capture: bool) -> tuple[Path, Path, list[str]]:
    """Both backends' comparisons of the scenario, simulated first (a minute at most), into out/<backend>."""
    setups = setups or default_setups(load_scenario(scenario_path))
    compare(load_scenario(scenario_path, {"backend": "simulation"}), setups, out / "simulation")
    emulation = {"backend": "emulation", **({"capture_packets": True} if capture else {})}
    compare(load_scenario(scenario_path, emulation), setups, out / "emulation")
    return out / "emulation", out / "simulation", setups


def numbers_table(title: str, columns: tuple[str, ...], caption: str | None = None) -> Table:
    """A table of these columns, right-aligned, as numbers read best."""
    table = Table(title=title, caption=caption)
    for column in columns:
        table.add_column(column, justify="right")
    return table


def comparison_rows(comparison: Path) -> pd.DataFrame:
    """A comparison's comparison.csv, one row per setup."""
    return pd.read_csv(comparison / "comparison.csv").set_index("setup")


def makespan_table(emu: pd.DataFrame, sim: pd.DataFrame, setups: list[str], console: Console) -> None:
    table = numbers_table(
        "simulated vs emulated makespan",
        (
            *("setup", "emulated s", "simulated s", "simulated / emulated", f"within {TARGET:.0%}"),
            *("shuffle OCS share emu", "shuffle OCS share sim", "fidelity emu"),
        ),
    )
    for setup in setups:
        ratio = sim.makespan_s[setup] / emu.makespan_s[setup]
        table.add_row(
            setup,
            f"{emu.makespan_s[setup]:.1f}",
            f"{sim.makespan_s[setup]:.1f}",
            f"{ratio:.3f}",
            "yes" if abs(ratio - 1) <= TARGET else "no",
            f"{emu.shuffle_ocs_share[setup]:.2f}",
            f"{sim.shuffle_ocs_share[setup]:.2f}",
            str(emu.fidelity[setup]),
        )
    console.print(table)
    order_emu, order_sim = ranking(emu.makespan_s[setups]), ranking(sim.makespan_s[setups])
    console.print(
        f"ordering, fastest first (within {TIE_FRACTION:.0%}: a tie): emulated {ranking_text(order_emu)}; "
        f"simulated {ranking_text(order_sim)}; {'same' if same_ranking(order_emu, order_sim) else 'different'}"
    )


JCT_MEASURES = {"median": "jct_median_s", "mean": "jct_mean_s", "p95": "jct_p95_s"}
JCT_BY_KIND = {"median recurring": "jct_median_recurring_s", "median ad hoc": "jct_median_adhoc_s"}


def jct_table(emu: pd.DataFrame, sim: pd.DataFrame, setups: list[str], console: Console) -> None:
    """Per setup, its JCT measures on both backends and their ratio (the recurring and ad-hoc medians only where
    the workload has ad-hoc jobs)."""
    mixed = emu[JCT_BY_KIND["median ad hoc"]].notna().any()
    measures = JCT_MEASURES | JCT_BY_KIND if mixed else JCT_MEASURES
    table = numbers_table("JCT, s: emulated / simulated, simulated / emulated", ("setup", *measures))
    for setup in setups:
        cells = []
        for column in measures.values():
            e, s = emu[column][setup], sim[column][setup]
            cells.append(f"{e:.1f} / {s:.1f}, {s / e:.3f}" if pd.notna(e) and pd.notna(s) and e else "-")
        table.add_row(setup, *cells)
    console.print(table)


def phase_table(runs: RunPairs, console: Console) -> pd.DataFrame:
    """Every setup's measures of where time went, emulated beside simulated; returned as one frame."""
    frames = []
    for setup, (emu, sim) in runs.items():
        side = pd.concat([phase_measures(emu), phase_measures(sim)], axis=1, keys=["emulated", "simulated"], sort=False)
        side["sim / emu"] = side.simulated / side.emulated
        table = numbers_table(f"{setup}: where the time went", ("measure", "emulated", "simulated", "sim / emu"))
        for measure, row in side.iterrows():
            table.add_row(str(measure), *(f"{v:.3g}" for v in row))
        console.print(table)
        last = pd.DataFrame({"emulated": last_job_phases(emu), "simulated": last_job_phases(sim)})
        console.print(f"{setup}: the last job to finish, phases in s")
        console.print(last.to_string())
        frames.append(side.assign(setup=setup))
    return pd.concat(frames)


def jobs_apart_table(runs: RunPairs, console: Console) -> pd.DataFrame:
    """Per setup, the JOBS_APART jobs whose JCT differs most between the backends; returned as one frame."""
    frames = []
    for setup, (emu, sim) in runs.items():
        apart = jobs_apart(emu, sim, JOBS_APART, ("emulated", "simulated"))
        console.print(f"{setup}: the {len(apart)} jobs whose JCT differs most (simulated - emulated), phases in s")
        console.print(apart.round(2).astype(object).T.to_string())  # ranks stay whole numbers
        frames.append(apart.assign(setup=setup))
    return pd.concat(frames)


def last_attempts(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of each task's last attempt (by `task_id` and `attempt` columns)."""
    return rows.sort_values("attempt").drop_duplicates("task_id", keep="last")


def reducer_shuffle_s(run: RunResults) -> pd.Series:
    """Each reducer's shuffle (its last attempt's start to its last fetch's end), by task_id."""
    tasks = last_attempts(run.tasks)
    reducers = with_fetched_s(tasks[tasks.kind != "map"], run.flows)
    return (reducers.fetched_s - reducers.start_s).set_axis(reducers.task_id)


def timer_wait_tables(runs: RunPairs, console: Console) -> None:
    """Per captured setup: how much longer the reducers' shuffles took than simulated, for those none of whose
    connections waited for TCP's retransmission timer and for those with a wait; and the connections' waits
    by the path they took."""
    table = numbers_table(
        "reducers' shuffle, emulated - simulated (excess), by whether a connection waited for TCP's timer",
        ("setup", "silence share", "no wait: n", "excess s", "a wait: n", "excess s", "waiting s", "corr", "unpaired"),
        caption="silence share: of all connections' time; waiting: while any connection of the reducer waited; "
        "corr: of excess and waiting over the reducers; unpaired: reducers whose connections were not told apart",
    )
    by_path = numbers_table(
        "connections' timer waits by path (rack, eps, ocs; mixed: part on a circuit)",
        (
            *("setup", "kind", "path", "connections", "connection s", "waits", "silence s", "silence share"),
            "backed off",
        ),
        caption="silence share: of the connections' time, the silence before their timer retransmissions; "
        "backed off: of that silence, the waits after a timer's retransmission that was lost too",
    )
    for setup, (emu, sim) in runs.items():
        if not (emu.path / CAPTURE_DIR).is_dir():
            continue
        connections = flow_connections(emu.path, emu.path / CAPTURE_DIR)
        waits = last_attempts(reducer_waits(connections).reset_index()).set_index("task_id").timer_wait_s
        side = pd.DataFrame({"excess": reducer_shuffle_s(emu) - reducer_shuffle_s(sim), "waiting": waits}).dropna()
        none, some = side[side.waiting == 0], side[side.waiting > 0]
        share = (emu.summary.get("fidelity") or {}).get("tcp_timer_stalls", {}).get("timer_silence_share")
        table.add_row(
            setup,
            f"{share:.3f}" if share is not None else "-",
            str(len(none)),
            f"{none.excess.mean():.2f}",
            str(len(some)),
            f"{some.excess.mean():.2f}",
            f"{some.waiting.mean():.2f}",
            f"{side.excess.corr(side.waiting):.2f}",
            str(int(waits.isna().sum())),
        )
        for row in path_waits(connections).reset_index().itertuples():
            by_path.add_row(
                setup,
                row.kind,
                row.path,
                f"{row.connections:d}",
                f"{row.connection_s:.0f}",
                f"{row.timer_waits:d}",
                f"{row.timer_silence_s:.0f}",
                f"{row.timer_silence_share:.3f}",
                f"{row.timer_backed_off_share:.2f}" if row.timer_waits else "-",
            )
    if table.row_count:
        console.print(table)
        console.print(by_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", nargs="?", type=Path, default=QUICKSTART)
    parser.add_argument("--policies", help="comma-separated setups (default: the scenario's comparison setups)")
    parser.add_argument(
        "--out", type=Path, help="where both comparisons go (default results/<scenario>-sim-vs-emu-<time>)"
    )
    parser.add_argument("--emulated", type=Path, help="an emulated comparison's directory, read instead of run")
    parser.add_argument("--simulated", type=Path, help="the simulated comparison of the same scenario")
    parser.add_argument(
        "--capture-packets", action="store_true", help="capture the emulated runs' packets (when running both)"
    )
    args = parser.parse_args()
    if (args.emulated is None) != (args.simulated is None):
        parser.error("--emulated and --simulated go together")
    if args.emulated:
        emulated, simulated = args.emulated, args.simulated
        simulated_setups = set(comparison_rows(simulated).index)
        setups = [s for s in comparison_rows(emulated).index if s in simulated_setups]
        if args.policies:
            wanted = args.policies.split(",")
            if missing := [s for s in wanted if s not in setups]:
                parser.error(f"--policies: {', '.join(missing)} not in both comparisons")
            setups = wanted
        out = args.out or emulated
        out.mkdir(parents=True, exist_ok=True)
    else:
        out = args.out or Path("results") / f"{args.scenario.stem}-sim-vs-emu-{time.strftime('%Y%m%d-%H%M%S')}"
        setups_wanted = args.policies.split(",") if args.policies else None
        emulated, simulated, setups = run_both(args.scenario, setups_wanted, out, args.capture_packets)
    console = Console(width=160)  # the tables' columns whole, also into a file
    emu, sim = comparison_rows(emulated), comparison_rows(simulated)
    makespan_table(emu, sim, setups, console)
    jct_table(emu, sim, setups, console)
    runs = {setup: (load(emulated / setup), load(simulated / setup)) for setup in setups}
    phase_table(runs, console).to_csv(out / "sim_vs_emu_phases.csv")
    console.print(f"phases side by side: {out / 'sim_vs_emu_phases.csv'}")
    jobs_apart_table(runs, console).to_csv(out / "sim_vs_emu_jobs_apart.csv")
    console.print(f"jobs apart: {out / 'sim_vs_emu_jobs_apart.csv'}")
    timer_wait_tables(runs, console)


if __name__ == "__main__":
    main()
