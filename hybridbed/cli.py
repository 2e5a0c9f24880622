"""The `hybridbed` command: bring up a hybrid DCN, check its fidelity, clean up after runs."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from hybridbed.config.fabric import FabricSpec, OcsSpec, circuit_scheduler_problems
from hybridbed.config.servers import ServersNotReady, ServerSpec, load_servers, place_racks
from hybridbed.config.validation import SpecError, parse_spec
from hybridbed.testbed.interrupts import stop_on_signals

if TYPE_CHECKING:  # pandas loads only for the commands that use it
    import pandas as pd

    from hybridbed.results.progress import Progress as RunProgress

console = Console(stderr=True)
LOG_PROGRESS_S = 60.0  # seconds between a run's progress lines when stderr is no terminal


class ProgressLines:
    """Progress as plain lines where stderr is no terminal (a log file, a pipe): rich's live displays print
    nothing there until they end, and a paper-scale setup runs for half an hour. A run gets a line at its
    first report, then at most one every LOG_PROGRESS_S, and one when it ends; on a terminal, nothing (the
    live display shows it)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._told: dict[str, float] = {}  # each run still under way -> when its last line was printed

    def tell(self, run: str, text: str, ended: bool = False) -> None:
        if console.is_terminal:
            return
        now = self._clock()
        if ended or now - self._told.get(run, -math.inf) >= LOG_PROGRESS_S:
            console.print(f"{time.strftime('%H:%M:%S')} {text}", highlight=False)
            self._told[run] = now
        if ended:
            self._told.pop(run, None)


def _progress_text(p: RunProgress) -> str:
    return f"{p.jobs_done}/{p.jobs_total} jobs, workload at {p.elapsed_s:.0f} s, {p.running_tasks} tasks running"


def _ended_text(run_dir: Path) -> str:
    """How a run ended, as its summary.json says: status, jobs, makespan and the emulation's verdict."""
    from hybridbed.results.load import read_json

    summary = read_json(run_dir / "summary.json")
    if not summary:
        return "ended without a summary"
    text = f"{summary['status']}, {summary['jobs_done']}/{summary['jobs_total']} jobs"
    if summary.get("makespan_s") is not None:
        text += f", makespan {summary['makespan_s']:.1f} s"
    if (fidelity := summary.get("fidelity")) is not None:
        text += f", fidelity {fidelity['verdict']}"
    return text


def _default(model: type[FabricSpec] | type[OcsSpec], field: str) -> str:
    """A spec field's default, for a flag's help: the spec holds it, the CLI only shows it."""
    return f"{model.model_fields[field].default:g}"


def _number_at_least(low: float, strictly: bool = False):
    """An argparse type: a finite number above `low` (or at least `low`); argparse names the flag when it is not."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < low or (strictly and value == low):
            raise argparse.ArgumentTypeError(
                f"{text} must be a finite number {'above' if strictly else 'of at least'} {low:g}"
            )
        return value

    return parse


def _fabric_arguments(parser: argparse.ArgumentParser, racks: int | None = None, hosts: int | None = None) -> None:
    group = parser.add_argument_group("fabric")
    group.add_argument("--racks", type=int, default=racks, required=racks is None)
    group.add_argument("--hosts", type=int, default=hosts, required=hosts is None, help="hosts per rack")
    group.add_argument(
        "--host-rate", type=float, help=f"host NIC rate, Mb/s (default {_default(FabricSpec, 'host_rate_mbps')})"
    )
    group.add_argument("--eps-rate", type=float, help="ToR-EPS uplink rate, Mb/s (default: from --oversubscription)")
    group.add_argument(
        "--oversubscription",
        type=float,
        help=f"rack host capacity / EPS uplink rate (default {_default(FabricSpec, 'oversubscription')})",
    )
    group.add_argument(
        "--ocs-rate", type=float, help=f"ToR-OCS rate, Mb/s (default {_default(FabricSpec, 'ocs_rate_mbps')})"
    )
    group.add_argument(
        "--ocs-ports", type=int, help=f"OCS ports per ToR (default {_default(FabricSpec, 'ocs_ports_per_tor')})"
    )
    group.add_argument(
        "--variant",
        choices=["hybrid", "f-eps", "eps"],
        help="f-eps: no OCS, EPS uplinks at the OCS rate; eps: no OCS, EPS as configured",
    )
    group.add_argument(
        "--userspace-tso",
        action="store_const",
        const=True,
        help="Open vSwitch userspace TSO, for rates past the datapath's packet ceiling (docs/network.md)",
    )


def _ocs_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("OCS controller")
    group.add_argument("--mode", choices=["pinned", "periodic"], help="circuits set through the API, or every interval")
    group.add_argument(
        "--interval-s",
        type=float,
        help=f"periodic reconfiguration interval (default {_default(OcsSpec, 'reconfig_interval_s')} s)",
    )
    group.add_argument(
        "--delay-ms", type=float, help=f"reconfiguration delay (default {_default(OcsSpec, 'reconfig_delay_ms')} ms)"
    )
    group.add_argument("--steering", choices=["all", "elephant", "marked"], help="which traffic a circuit carries")
    group.add_argument(
        "--bulk-dscp",
        type=int,
        help=f"DSCP of bulk traffic in steering mode marked (default {_default(OcsSpec, 'bulk_dscp')})",
    )
    group.add_argument("--demand-source", choices=["hints", "measured", "both"])
    group.add_argument(
        "--measured-demand", choices=["interval", "backlog"], help="a pair's last interval, or its bytes since idle"
    )
    group.add_argument("--elephant-threshold", type=float, help="bytes per interval below which demand is ignored")
    group.add_argument(
        "--circuit-scheduler",
        choices=["edmonds", "greedy", "solstice", "rotor"],
        help=f"periodic mode's circuit scheduler (default {OcsSpec.model_fields['scheduler'].default})",
    )


def _given(args: argparse.Namespace, mapping: dict[str, str]) -> dict:
    return {field: getattr(args, attr) for attr, field in mapping.items() if getattr(args, attr, None) is not None}


def _add_capture_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--capture-packets",
        action="store_true",
        help="emulation: every host's TCP headers into pcap/<host>.pcap, and the retransmission-timer stalls in "
        "the summary",
    )


def fabric_from_args(args: argparse.Namespace) -> FabricSpec:
    """The fabric to emulate: validated, and within what an emulated link carries."""
    fabric = parse_spec(
        FabricSpec,
        _given(
            args,
            {
                "racks": "racks",
                "hosts": "hosts_per_rack",
                "host_rate": "host_rate_mbps",
                "eps_rate": "eps_rate_mbps",
                "oversubscription": "oversubscription",
                "ocs_rate": "ocs_rate_mbps",
                "ocs_ports": "ocs_ports_per_tor",
                "variant": "variant",
                "userspace_tso": "userspace_tso",
            },
        ),
    )
    if problems := fabric.emulation_limits():
        raise SpecError("; ".join(problems))
    return fabric


def ocs_from_args(args: argparse.Namespace) -> OcsSpec:
    return parse_spec(
        OcsSpec,
        _given(
            args,
            {
                "mode": "mode",
                "interval_s": "reconfig_interval_s",
                "delay_ms": "reconfig_delay_ms",
                "steering": "steering",
                "bulk_dscp": "bulk_dscp",
                "demand_source": "demand_source",
                "measured_demand": "measured_demand",
                "elephant_threshold": "elephant_threshold_bytes",
                "circuit_scheduler": "scheduler",
            },
        ),
    )


def cmd_net(args: argparse.Namespace) -> int:
    from hybridbed.testbed.network import HybridNetwork

    fabric, ocs = fabric_from_args(args), ocs_from_args(args)
    if problems := circuit_scheduler_problems(fabric, ocs):
        raise SpecError("; ".join(problems))
    servers = _servers(args)
    stop_on_signals()
    with console.status(f"bringing up {fabric.racks} racks x {fabric.hosts_per_rack} hosts ..."):
        net = HybridNetwork(fabric, ocs, servers=servers)
        net.start()
    try:
        console.print(
            f"[bold]run {net.run_id}[/bold]: {fabric.racks} racks x {fabric.hosts_per_rack} hosts, "
            f"{f'EPS only ({fabric.variant})' if not fabric.has_ocs else 'EPS + OCS'}, {net.datapath} datapath, up in {net.bringup_s:.1f} s\n"
            f"  host {fabric.host_rate_mbps:g} Mb/s, ToR-EPS {fabric.eps_uplink_mbps:g} Mb/s"
            + (
                f", ToR-OCS {fabric.ocs_rate_mbps:g} Mb/s; OCS {ocs.mode}, delay {ocs.reconfig_delay_ms:g} ms, steering {ocs.steering}"
                if fabric.has_ocs
                else ""
            )
            + (f"\n  racks per server: {net.racks_per_server()}" if servers else "")
            + f"\n  REST API: ip netns exec {net.run_id} curl -s 127.0.0.1:8080/circuits"
        )
        if args.cli:
            from mininet.cli import CLI

            console.print("Mininet CLI: Ctrl-D tears the network down.")
            CLI(net.net)
        else:
            console.print("Up. Ctrl-C tears the network down.")
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        with console.status("tearing down ..."):
            net.stop()
        console.print(f"run {net.record_id} torn down")
    return 0


def _servers(args: argparse.Namespace) -> list[ServerSpec]:
    """The further servers of --servers FILE, validated and placed before anything is built."""
    if args.servers is None:
        return []
    servers = load_servers(Path(args.servers))
    place_racks(args.racks, servers)
    return servers


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def cmd_check(args: argparse.Namespace) -> int:
    from hybridbed.testbed.fidelity import run_check
    from hybridbed.testbed.probes import CHECK_MIN_RACKS

    fabric = fabric_from_args(args)
    if fabric.has_ocs and fabric.racks < CHECK_MIN_RACKS:
        raise SpecError(
            f"--racks: {fabric.racks}; the reconfiguration probe moves a circuit between three racks, "
            f"so a check of the hybrid fabric needs --racks {CHECK_MIN_RACKS} or more"
        )
    servers = _servers(args)
    stop_on_signals()
    with console.status(f"measuring a {fabric.racks}x{fabric.hosts_per_rack} fabric (about a minute) ..."):
        report = run_check(fabric, reconfig_delay_ms=args.delay_ms, seconds=args.seconds, servers=servers)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
        return 0
    table = Table(title="hybridbed fidelity self-check")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in report.as_dict().items():
        table.add_row(key, _fmt(value))
    Console().print(table)
    return 0


def _results_dir(given: str | None, name: str) -> Path:
    """--out, or results/<name>-<time>; never a directory that exists (results are not overwritten)."""
    out = Path(given) if given else Path("results") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    if out.exists():
        raise SpecError(f"--out: {out} already exists; give a new directory")
    return out


class NeedsRoot(RuntimeError):
    pass


def _backend_overrides(args: argparse.Namespace) -> dict:
    """The scenario fields --backend and --capture-packets set."""
    return {
        **({"backend": args.backend} if args.backend else {}),
        **({"capture_packets": True} if args.capture_packets else {}),
    }


def _load_for_backend(args: argparse.Namespace, overrides: dict | None = None):
    """The scenario with --backend and --capture-packets applied; emulation needs root, simulation does not."""
    from hybridbed.experiments.scenarios import load_scenario

    scenario = load_scenario(Path(args.scenario), {**(overrides or {}), **_backend_overrides(args)})
    if scenario.backend == "emulation" and os.geteuid() != 0:
        raise NeedsRoot
    return scenario


def cmd_run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hybridbed.experiments.backends import run_backend
    from hybridbed.experiments.run_failed import RunFailed
    from hybridbed.workloads.build import build_workload

    overrides = {"scheduler.policy": args.policy} if args.policy else {}
    scenario = _load_for_backend(args, overrides)
    jobs = build_workload(scenario)
    out = _results_dir(args.out, f"{scenario.name}-{scenario.scheduler.policy}")
    stop_on_signals()
    console.print(
        f"[bold]{scenario.name}[/bold]: {len(jobs)} jobs under {scenario.scheduler.policy} on "
        f"{scenario.fabric.racks} racks x {scenario.fabric.hosts_per_rack} hosts ({scenario.backend}) -> {out}"
    )
    with Progress(
        TextColumn("jobs"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[running]} tasks running"),
        console=console,
    ) as bar:
        task = bar.add_task("jobs", total=len(jobs), running=0)
        lines = ProgressLines()

        def tell(p: RunProgress) -> None:
            bar.update(task, completed=p.jobs_done, running=p.running_tasks)
            lines.tell(out.name, _progress_text(p))

        try:
            summary = run_backend(scenario, out, tell)
        except KeyboardInterrupt:
            console.print(f"[red]interrupted[/red]; partial results in {out}")
            return 130
        except RunFailed as err:
            console.print(f"[red]run failed: {err}[/red]; partial results in {out}")
            return 1
    console.print(
        f"makespan {summary['makespan_s']:.1f} s, median JCT {summary['jct_median_s']:.1f} s, "
        f"p95 JCT {summary['jct_p95_s']:.1f} s; results in {out}"
    )
    if (fidelity := summary.get("fidelity")) is not None:
        console.print(_fidelity_line(fidelity["verdict"], fidelity["reasons"]))
        if (stalls := fidelity.get("tcp_timer_stalls")) and stalls["timer_retransmissions"]:
            console.print(
                f"TCP: {stalls['connections']} connections waited for a retransmission timer "
                f"{stalls['timer_retransmissions']} times, {stalls['timer_silence_share']:.1%} of their time "
                f"(longest {stalls['timer_silence_max_s']:.1f} s); packets in {out / 'pcap'}"
            )
        if (held := fidelity.get("task_throttling")) and held["tasks"]:
            used = f"; a task process used {held['cpu_cores_mean']:.3f} cores on average" if held["cpu_s"] else ""
            console.print(
                f"CPU quotas held {held['tasks']} of {held['of_tasks']} tasks back {held['seconds']:.1f} s "
                f"({held['share_of_task_time']:.1%} of their time, longest {held['max_s']:.1f} s{used})"
            )
    return 0


def _fidelity_line(verdict: str, reasons: list[str]) -> str:
    """A run's fidelity verdict as the console says it (docs/network.md explains how to read it)."""
    colour = {"ok": "green", "warn": "yellow"}.get(verdict, "red")
    return f"fidelity: [{colour}]{verdict}[/{colour}]" + (": " + "; ".join(reasons) if reasons else "")


def cmd_compare(args: argparse.Namespace) -> int:
    from hybridbed.experiments.comparison import compare, default_setups
    from hybridbed.experiments.process_pool import default_workers
    from hybridbed.experiments.scenarios import available_setups
    from hybridbed.results.comparison_table import comparison_json
    from hybridbed.workloads.bounds import makespan_lower_bounds
    from hybridbed.workloads.build import build_workload

    scenario = _load_for_backend(args)
    setups = args.policies.split(",") if args.policies else default_setups(scenario)
    unknown = [s for s in setups if s not in available_setups()]
    if unknown:
        raise SpecError(f"--policies: unknown {', '.join(unknown)}; available: {', '.join(available_setups())}")
    workers = min(len(setups), args.workers if args.workers is not None else default_workers(scenario.backend))
    out = _results_dir(args.out, f"{scenario.name}-compare")
    jobs = len(build_workload(scenario))
    stop_on_signals()
    where = "one after another" if workers == 1 else f"{workers} at a time"
    console.print(
        f"[bold]{scenario.name}[/bold]: {jobs} jobs under {', '.join(setups)}, {where} ({scenario.backend}) -> {out}"
    )
    console.print(_bounds_line(makespan_lower_bounds(scenario)))
    status = console.status("")
    status.start()
    running: dict[str, str] = {}  # the setups under way -> their progress, in the order they started
    lines = ProgressLines()

    def tell(setup: str, p: RunProgress | None) -> None:
        if p is None:
            running.pop(setup, None)
            lines.tell(setup, f"{setup}: {_ended_text(out / setup)}", ended=True)
        else:
            running[setup] = f"{setup}: {_progress_text(p)}"
            lines.tell(setup, running[setup])
        status.update("; ".join(running.values()))

    try:
        table = compare(scenario, setups, out, tell, workers)
    except KeyboardInterrupt:
        console.print(f"[red]interrupted[/red]; partial results in {out}")
        return 130
    finally:
        status.stop()
    if args.json:
        print(comparison_json(table))
    else:
        _print_comparison(table, scenario.compare_baseline, f"{scenario.name}: {jobs} jobs ({scenario.backend})")
        console.print(f"table (comparison_table.md, .csv; comparison.csv has every column) and plots in {out}")
    return 0 if all(str(s) == "done" for s in table.status) else 1


def _seeds(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(seed) for seed in text.split(",")]
    except ValueError:
        raise SpecError(f"--seeds: comma-separated whole numbers (got {text!r})") from None


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hybridbed.config.scenario import read_scenario
    from hybridbed.experiments.process_pool import default_workers
    from hybridbed.experiments.sweep import SweepPoint, plan_sweep, read_grid, run_sweep, validate_execution

    grid = read_grid(Path(args.grid))
    data = read_scenario(Path(args.scenario), _backend_overrides(args))
    sweep = plan_sweep(data, grid, args.policies.split(",") if args.policies else None, _seeds(args.seeds))
    if sweep.backend == "emulation" and os.geteuid() != 0:
        raise NeedsRoot
    workers = args.workers if args.workers is not None else default_workers(sweep.backend)
    validate_execution(sweep, workers, args.dask)
    out = Path(args.out) if args.out else Path("results") / f"{sweep.name}-sweep-{Path(args.grid).stem}"
    where = f"Dask at {args.dask}" if args.dask else f"{workers} process(es)"
    console.print(f"[bold]{sweep.name}[/bold]: {len(sweep.points)} runs ({sweep.backend}) on {where} -> {out}")
    stop_on_signals()
    with Progress(
        TextColumn("runs"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
    ) as bar:
        task = bar.add_task("runs", total=len(sweep.points), last="")
        lines = ProgressLines()

        def tell(done: int, total: int, point: SweepPoint | None) -> None:
            bar.update(task, completed=done, last=f"last: {point.name}" if point else "")
            told = f"{done}/{total} runs" + (f", last: {point.name}" if point else "")
            lines.tell(sweep.name, told, ended=done == total)

        try:
            table = run_sweep(sweep, out, workers, args.dask, tell)
        except KeyboardInterrupt:
            console.print(f"[red]interrupted[/red]; finished runs are in {out}/sweep.csv; run again to resume")
            return 130
    if args.json:
        print(table.to_json(orient="records", indent=2))
    else:
        _print_sweep(table, sweep.grid.fields, sweep.grid.plot[0])
        console.print(f"table (sweep.csv, a row per run) and plots (sweep-<field>.png) in {out}")
    return 0 if (table.status == "done").all() else 1


def _print_sweep(table: pd.DataFrame, fields: dict[str, list], measure: str) -> None:
    """Per swept field, the measure's mean over seeds (and the other fields) by value and setup."""
    swept = [f for f, values in fields.items() if len(values) > 1] or [None]
    for field in swept:
        rows = table.assign(_value=table[field].astype(str) if field else "all")
        means = rows.pivot_table(index="_value", columns="setup", values=measure, aggfunc="mean", sort=False)
        view = Table(title=f"{measure}, mean over seeds" + (f", by {field}" if field else ""))
        view.add_column(field or "")
        for setup in means.columns:
            view.add_column(str(setup), justify="right")
        for value, row in means.iterrows():
            view.add_row(str(value), *(_fmt(v) for v in row))
        console.print(view)


def _bounds_line(bounds: dict[str, float]) -> str:
    """The workload's makespan lower bounds, the binding one first (hybridbed/workloads/bounds.py)."""
    ordered = sorted(bounds.items(), key=lambda item: -item[1])
    return "lower bounds on the makespan, total demand / capacity: " + ", ".join(
        f"{name} {seconds:,.1f} s" for name, seconds in ordered
    )


def _print_comparison(table, baseline: str, title: str, out: Console | None = None) -> None:
    """Measures as rows, setups as columns, with the ratios to the baseline: 80 columns hold four setups."""
    from rich import box

    from hybridbed.results.comparison_table import comparison_table, fidelity_notes, legend

    view = comparison_table(table, baseline)
    printed = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), title_justify="left")
    printed.add_column("measure", justify="left", no_wrap=True)
    for setup in view.columns:
        printed.add_column(setup, justify="right")
    for measure, row in view.iterrows():
        printed.add_row(str(measure), *row.tolist())
    out = out or Console()
    out.print(printed)
    out.print(legend(view, baseline), style="dim")
    for setup, verdict, reasons in fidelity_notes(table):
        out.print(f"{setup} " + _fidelity_line(verdict, [reasons] if reasons else []))


def cmd_results(args: argparse.Namespace) -> int:
    from hybridbed.results.index import find_results

    entries = find_results(Path(args.dir))
    if args.json:
        print(json.dumps([e.as_dict() for e in entries], indent=2))
        return 0
    if not entries:
        console.print(f"no runs, comparisons or sweeps under {args.dir}")
        return 0
    table = Table(title=f"results under {args.dir}, newest first", box=None, padding=(0, 1), title_justify="left")
    for column in ("finished", "scenario", "backend", "makespan s per setup (fidelity)", "status", "path"):
        table.add_column(column, overflow="fold")  # names and paths whole, over two lines if need be
    for e in entries:
        makespans = ", ".join(
            (f"{s} {m:.1f}" if m is not None else f"{s} -") + (f" ({e.verdicts[s]})" if e.verdicts.get(s) else "")
            for s, m in e.makespans_s.items()
        )
        finished = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.finished_unix))
        table.add_row(finished, e.scenario, e.backend, makespans, e.status, e.path)
    Console().print(table)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from hybridbed.results.report import NotAResultsDirectory, write_report

    try:
        out = write_report(Path(args.dir))
    except NotAResultsDirectory as err:
        console.print(f"[red]{err}[/red]")
        return 2
    console.print(f"report in {out}")
    return 0


def cmd_policies(args: argparse.Namespace) -> int:
    from hybridbed.scheduler.policy import registered_policies

    for name, policy in sorted(registered_policies().items()):
        print(f"{name:12s} {policy.summary}")
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from hybridbed.testbed.cleanup import RunStillActive, clean

    try:
        actions = clean(args.run, force=args.force)
    except (KeyError, RunStillActive) as err:
        console.print(f"[red]{err.args[0]}[/red]")
        return 1
    if not actions:
        console.print("nothing to clean: no recorded run without a live owner")
    for run_id, done in actions.items():
        console.print(f"[bold]{run_id}[/bold]")
        for line in done or ["nothing was left"]:
            console.print(f"  {line}")
    return 0


def _servers_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--servers",
        metavar="FILE",
        help="YAML list of further servers to spread the racks over (docs/multi-server.md); default: this machine",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hybridbed", description="Emulation testbed for job scheduling in hybrid EPS/OCS datacenter networks"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    net = sub.add_parser("net", help="bring up an emulated hybrid DCN")
    _fabric_arguments(net)
    _ocs_arguments(net)
    net.add_argument("--cli", action="store_true", help="open the Mininet CLI; Ctrl-D tears down")
    _servers_argument(net)
    net.set_defaults(func=cmd_net)

    check = sub.add_parser("check", help="fidelity self-check: goodput, steering, reconfiguration gap, bring-up time")
    _fabric_arguments(check, racks=4, hosts=2)
    check.add_argument(
        "--delay-ms", type=_number_at_least(0), default=50.0, help="reconfiguration delay to measure (default 50)"
    )
    check.add_argument(
        "--seconds", type=_number_at_least(0, strictly=True), default=4.0, help="length of each goodput measurement"
    )
    check.add_argument("--json", action="store_true", help="print one JSON object")
    _servers_argument(check)
    check.set_defaults(func=cmd_check)

    run = sub.add_parser("run", help="run a scenario's workload on the emulated network under one policy")
    run.add_argument("scenario", help="scenario YAML file")
    run.add_argument("--policy", help="override the scenario's scheduler.policy")
    run.add_argument("--out", help="results directory (default results/<scenario>-<policy>-<time>)")
    run.add_argument("--backend", choices=["emulation", "simulation"], help="override the scenario's backend")
    _add_capture_flag(run)
    run.set_defaults(func=cmd_run)

    compare = sub.add_parser("compare", help="run a scenario under several policies and compare them")
    compare.add_argument("scenario", help="scenario YAML file")
    compare.add_argument(
        "--policies",
        help="comma-separated setups: registered policies and f-eps "
        "(default: the scenario's compare list, else fair, corral, jobpacker, f-eps)",
    )
    compare.add_argument("--out", help="results directory (default results/<scenario>-compare-<time>)")
    compare.add_argument("--json", action="store_true", help="print one JSON object keyed by setup")
    compare.add_argument("--backend", choices=["emulation", "simulation"], help="override the scenario's backend")
    compare.add_argument(
        "--workers", type=int, help="simulated setups at once (default: one per CPU; emulated setups run one at a time)"
    )
    _add_capture_flag(compare)
    compare.set_defaults(func=cmd_compare)

    sweep = sub.add_parser("sweep", help="run a scenario over a grid of field values, setups and seeds")
    sweep.add_argument("scenario", help="scenario YAML file")
    sweep.add_argument("--grid", required=True, help="grid YAML: fields (path -> values), setups, seeds, plot")
    sweep.add_argument("--policies", help="comma-separated setups (default: the grid's, else the scenario's)")
    sweep.add_argument("--seeds", help="comma-separated seeds (default: the grid's, else the scenario's seed)")
    sweep.add_argument(
        "--workers", type=int, help="simulated runs at once (default: one per CPU; an emulated sweep runs one)"
    )
    sweep.add_argument("--dask", metavar="ADDRESS", help="run on the Dask scheduler at ADDRESS (tcp://host:8786)")
    sweep.add_argument(
        "--out", help="sweep directory (default results/<scenario>-sweep-<grid>); an existing sweep resumes"
    )
    sweep.add_argument("--json", action="store_true", help="print the table as one JSON list")
    sweep.add_argument("--backend", choices=["emulation", "simulation"], help="override the scenario's backend")
    _add_capture_flag(sweep)
    sweep.set_defaults(func=cmd_sweep)

    policies = sub.add_parser("policies", help="list the registered scheduling policies")
    policies.set_defaults(func=cmd_policies)

    results = sub.add_parser("results", help="list past runs, comparisons and sweeps, newest first")
    results.add_argument("dir", nargs="?", default="results", help="where to look (default: results)")
    results.add_argument("--json", action="store_true", help="print one JSON list")
    results.set_defaults(func=cmd_results)

    report = sub.add_parser("report", help="write one self-contained HTML page for a comparison or run")
    report.add_argument("dir", help="the comparison's or run's results directory")
    report.set_defaults(func=cmd_report)

    clean = sub.add_parser("clean", help="remove what runs created (all runs whose process is gone, or one run)")
    clean.add_argument("run", nargs="?", help="run id (default: every run whose owning process has ended)")
    clean.add_argument("--force", action="store_true", help="clean a run even though its process still runs")
    clean.set_defaults(func=cmd_clean)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    needs_root = "[red]emulation needs root (Mininet, Open vSwitch, namespaces, cgroups)[/red]"
    if os.geteuid() != 0 and args.command in ("net", "check", "clean"):
        console.print(needs_root)
        return 1
    try:
        return args.func(args)
    except SpecError as err:
        console.print(f"[red]invalid setting: {err}[/red]")
        return 2
    except ServersNotReady as err:
        console.print(f"[red]{err}[/red]")
        return 1
    except NeedsRoot:
        console.print(needs_root + " (the simulation backend does not: --backend simulation)")
        return 1


if __name__ == "__main__":
    sys.exit(main())
