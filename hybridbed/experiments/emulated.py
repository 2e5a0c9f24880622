"""One emulated run of a scenario under one policy: network, controller, scheduler, workers, results.

The run directory gets the resolved scenario and environment.json first (`run_dir.py`), then results as they
happen (the scheduler's CSVs, `links.csv` from the switches' port counters every second, `ocs_events.csv` and
`ocs_demand.csv` at the end) and the logs of the scheduler and every worker. Every time is in seconds since the workload began.
Whatever ends the run (success, a failure, Ctrl-C), the processes are stopped, the network is torn down and
what was written stays.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from hybridbed.config.addressing import HostAddress, TorCorePort
from hybridbed.config.fabric import OcsSpec
from hybridbed.config.scenario import Scenario
from hybridbed.config.servers import ServersNotReady
from hybridbed.controller.client import DEFAULT_REST_PORT, ControllerError
from hybridbed.controller.demand_log import DEMAND_FIELDS, read_demand_log
from hybridbed.controller.events import OCS_EVENT_FIELDS, OcsEvent, read_event_log
from hybridbed.experiments.run_dir import begin_run_dir
from hybridbed.experiments.run_failed import RunFailed
from hybridbed.results.fidelity import fidelity_summary
from hybridbed.results.path_accounting import annotate_flows, uplink_bytes
from hybridbed.results.progress import Progress, read_progress
from hybridbed.results.records import LinkCounter, LinkCounterLog
from hybridbed.results.summary import add_flow_totals, add_uplink_totals, mark_status, summarize, update_summary
from hybridbed.results.tcp_stalls import run_stalls
from hybridbed.testbed.capture import CAPTURE_DIR, CaptureError, capture_missing, start_captures
from hybridbed.testbed.fidelity_monitor import FabricMonitor
from hybridbed.testbed.interrupts import deferred_interrupts, stops_as_interrupts
from hybridbed.testbed.network import HybridNetwork, NetworkStartError
from hybridbed.workers.protocol import SOCKET_NAME
from hybridbed.workloads.build import build_workload

POLL_S = 1.0


STOP_GRACE_S = 10.0  # a process's time to exit on SIGTERM (the scheduler writes its summary) before SIGKILL


def run_scenario(scenario: Scenario, out_dir: Path, on_progress: Callable[[Progress], None] | None = None) -> dict:
    """Run the scenario's workload under its policy; returns summary.json's content. Raises RunFailed."""
    if scenario.capture_packets and (missing := capture_missing()):
        raise RunFailed(missing)
    begin_run_dir(scenario, out_dir)
    net = HybridNetwork(scenario.fabric, scenario.scaled_ocs(), servers=scenario.servers)
    try:
        net.start()
    except (NetworkStartError, ServersNotReady) as err:
        raise RunFailed(str(err)) from err
    processes: list[subprocess.Popen] = []
    captures: list[subprocess.Popen] = []
    status = "failed"
    t0 = time.time()
    servers = range(len(scenario.servers) + 1)
    host_pids = [
        {a.name: net.net.get(a.name).pid for a in net.plan.hosts() if net.rack_server[a.rack] == k} for k in servers
    ]
    monitor = FabricMonitor(scenario.fabric, out_dir / "fidelity.csv", host_pids, net.forwarding_pid, net.remotes)
    try:
        with stops_as_interrupts():
            if scenario.capture_packets:
                try:
                    start_captures(net, out_dir, captures)
                except CaptureError as err:
                    raise RunFailed(str(err)) from err
            task_cgroups = [net.task_cgroups_on(k) for k in servers]
            socket_path = _write_cluster(net, out_dir, task_cgroups[0])
            scheduler = _start_scheduler(net, out_dir, processes)
            _wait_for_socket(str(socket_path), scheduler)
            _start_workers(net, scenario, out_dir, net.reach_from_every_server(socket_path), task_cgroups, processes)
            code = _follow(net, scheduler, out_dir, scenario, monitor, on_progress)
            if code != 0:
                raise RunFailed(f"the scheduler exited with status {code}; see {out_dir / 'scheduler.log'}")
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        with deferred_interrupts():  # a second Ctrl-C must not leave the network half torn down
            try:
                _stop(processes[:1], STOP_GRACE_S)  # the scheduler first: on SIGTERM it still writes its summary
                _stop(processes[1:], STOP_GRACE_S)
                _stop(captures, STOP_GRACE_S)  # last: they see the run's last packets
                workload_t0 = _workload_start(out_dir) or t0
                events = _write_ocs_events(net, out_dir, workload_t0)
                _write_csv(out_dir / "ocs_demand.csv", DEMAND_FIELDS, read_demand_log(net.demand_log, workload_t0))
                if not (out_dir / "summary.json").exists() and (out_dir / "jobs.csv").exists():
                    summarize(out_dir, len(build_workload(scenario)), status)  # the scheduler died before its own
                _account_paths(out_dir, events, scenario.scaled_ocs())
                _add_fidelity(out_dir, monitor)
            finally:
                net.stop(status=status)
            if status == "interrupted":  # the scheduler, stopped by SIGTERM, could only say it failed
                mark_status(out_dir, status)
    return json.loads((out_dir / "summary.json").read_text())


def _write_cluster(net: HybridNetwork, out_dir: Path, task_cgroups: dict) -> Path:
    """cluster.json, which tells the scheduler process its socket, the controller and the hosts; returns the
    socket's path."""
    socket_path = net.record.state_dir / SOCKET_NAME
    hosts = [
        {
            "name": a.name,
            "rack": a.rack,
            "ip": a.ip,
            "server": net.rack_server[a.rack],
            "data_dir": str(_data_dir(net, a)),
        }
        for a in net.plan.hosts()
    ]
    cluster = {
        "socket": str(socket_path),
        "controller_port": DEFAULT_REST_PORT,
        "hosts": hosts,
        # this machine's: a lost worker's tasks elsewhere go with its server's part of the run
        "task_cgroups": {key: task_cgroups[key] for key in ("roots", "version")},
    }
    (out_dir / "cluster.json").write_text(json.dumps(cluster, indent=2))
    return socket_path


def _start_scheduler(net: HybridNetwork, out_dir: Path, processes: list[subprocess.Popen]) -> subprocess.Popen:
    """The scheduler process, in the run's cgroup, added to `processes` and the run's record as it starts."""
    with (out_dir / "scheduler.log").open("w") as log:  # the process has its own copy of the file
        scheduler = subprocess.Popen(
            [sys.executable, "-m", "hybridbed.experiments.scheduler_process", str(out_dir)],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=net.cgroup.join_self,
        )
    processes.append(scheduler)
    net.record.add_process(scheduler.pid, "scheduler")
    return scheduler


def _start_workers(
    net: HybridNetwork,
    scenario: Scenario,
    out_dir: Path,
    sockets: list[Path],
    task_cgroups: list[dict],
    processes: list[subprocess.Popen],
) -> None:
    """One worker agent in every emulated host, each added to `processes` and the run's record as it starts
    (so a failure part way still stops those already started)."""
    (out_dir / "workers").mkdir()
    w = scenario.workers
    for address in net.plan.hosts():
        server = net.rack_server[address.rack]
        cmd = [
            net.python_on(server),
            "-m",
            "hybridbed.workers.agent",
            "--scheduler-socket",
            str(sockets[server]),
            "--host",
            address.name,
            "--rack",
            str(address.rack),
            "--ip",
            address.ip,
            "--slots",
            str(w.slots_per_host),
            "--cores",
            str(w.cores_per_host),
            "--disk-read-mbps",
            str(w.disk_read_mbps_per_host),
            "--disk-write-mbps",
            str(w.disk_write_mbps_per_host),
            "--memory-mb",
            str(w.memory_mb_per_host),
            "--data-dir",
            str(_data_dir(net, address)),
            "--cgroup-roots",
            *task_cgroups[server]["seen_from_hosts"],
            "--cgroup-version",
            str(task_cgroups[server]["version"]),
            "--compute-mode",
            w.compute,
            "--heartbeat-s",
            str(w.heartbeat_s),
        ]
        with (out_dir / "workers" / f"{address.name}.log").open("w") as log:  # the worker has its own copy
            proc = net.net.get(address.name).popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        processes.append(proc)
        net.record.add_process(proc.pid, f"worker {address.name}")


def _data_dir(net: HybridNetwork, address: HostAddress) -> Path:
    """Where the host's agent keeps its input blocks and map outputs: on the server that holds its rack."""
    return net.state_dir_on(net.rack_server[address.rack]) / "hosts" / address.name


def _stop(processes: list[subprocess.Popen], grace_s: float) -> None:
    """SIGTERM to every process still running, then SIGKILL to those alive after `grace_s` (one deadline for
    all, so a run with many workers does not wait for each in turn)."""
    running = []
    for proc in processes:
        if proc.poll() is None:
            proc.terminate()
            running.append(proc)
    deadline = time.monotonic() + grace_s
    for proc in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for_socket(path: str, scheduler: subprocess.Popen, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not Path(path).exists():
        if scheduler.poll() is not None:
            raise RunFailed(f"the scheduler exited with status {scheduler.returncode} before listening")
        if time.monotonic() > deadline:
            raise RunFailed(f"the scheduler did not open {path} within {timeout_s:g} s")
        time.sleep(0.05)


def _follow(
    net: HybridNetwork,
    scheduler: subprocess.Popen,
    out_dir: Path,
    scenario: Scenario,
    monitor: FabricMonitor,
    on_progress: Callable[[Progress], None] | None,
) -> int:
    """Until the scheduler ends: sample the ToRs' core port counters into links.csv, watch the run's fidelity
    (fidelity.csv), report progress.

    Sample times count from the workload's start, which the scheduler gives in progress.json (the origin of
    every result time); the counters read before it are written once it is known, at a negative time."""
    ports = {(p.switch, p.port): p for p in net.plan.tor_core_ports()}
    started = time.time()
    before_workload = (started, _read_counters(net, ports))
    workload_t0 = None
    links = LinkCounterLog(out_dir / "links.csv", interval_s=0.0)  # sampled every POLL_S
    try:
        while scheduler.poll() is None:
            if time.time() - started > scenario.max_duration_s + 120:
                raise RunFailed(f"the scheduler is still running {scenario.max_duration_s + 120:g} s into the run")
            progress = read_progress(out_dir)
            if workload_t0 is None and progress is not None and progress.started_at_unix:
                workload_t0 = progress.started_at_unix
                links.record(before_workload[0] - workload_t0, before_workload[1] or [])
                monitor.start(workload_t0)
            if workload_t0 is not None:
                links.record(time.time() - workload_t0, _read_counters(net, ports) or [])
            if on_progress is not None and progress is not None:
                on_progress(progress)
            time.sleep(POLL_S)
        if workload_t0 is not None:
            links.record(time.time() - workload_t0, _read_counters(net, ports) or [])
    finally:
        monitor.stop()
        links.close()
    return scheduler.returncode


def _workload_start(out_dir: Path) -> float | None:
    """When the scheduler began the workload (unix time), if it got that far."""
    progress = read_progress(out_dir)
    return progress.started_at_unix if progress is not None else None


def _read_counters(net: HybridNetwork, ports: dict[tuple[str, int], TorCorePort]) -> list[LinkCounter] | None:
    """Every ToR core port's counters now; None while the controller is being restarted (a sample missing
    from links.csv)."""
    try:
        counters_by_switch = net.controller.ports()
    except (ControllerError, OSError):
        return None
    return [
        LinkCounter(port.switch, port.port, port.link, counters["tx_bytes"], counters["rx_bytes"])
        for switch, counters_by_port in counters_by_switch.items()
        for number, counters in counters_by_port.items()
        if (port := ports.get((switch, int(number)))) is not None
    ]


def _account_paths(out_dir: Path, events: list[OcsEvent], ocs_spec: OcsSpec) -> None:
    """Add each flow's path and OCS bytes to flows.csv, and the EPS/OCS byte split, all traffic and shuffle
    apart, to summary.json."""
    summary_path, flows_path, links_path = (out_dir / n for n in ("summary.json", "flows.csv", "links.csv"))
    if not summary_path.exists():
        return
    summary = json.loads(summary_path.read_text())
    if "started_at_unix" not in summary:  # made for a scheduler that died: flow times cannot be placed on the clock
        return
    flows = pd.read_csv(flows_path)
    annotate_flows(flows, events, summary["started_at_unix"], ocs_spec.steering).to_csv(flows_path, index=False)
    eps, ocs = uplink_bytes(pd.read_csv(links_path)) if links_path.exists() else (0, 0)
    add_uplink_totals(out_dir, eps, ocs, len(events))
    add_flow_totals(out_dir, ocs_spec.elephant_threshold_bytes)


def _add_fidelity(out_dir: Path, monitor: FabricMonitor) -> None:
    """summary.json's `fidelity`: the verdict on this run and the measures behind it."""
    samples_path = out_dir / "fidelity.csv"
    if not (out_dir / "summary.json").exists() or not samples_path.exists():
        return
    events = pd.read_csv(out_dir / "ocs_events.csv")
    tasks = pd.read_csv(out_dir / "tasks.csv") if (out_dir / "tasks.csv").exists() else None
    fidelity = fidelity_summary(pd.read_csv(samples_path), events, monitor.cpu_share_of_a_core, monitor.tcp, tasks)
    if (capture_dir := out_dir / CAPTURE_DIR).is_dir():
        hosts = json.loads((out_dir / "cluster.json").read_text())["hosts"]
        fidelity["tcp_timer_stalls"] = run_stalls(capture_dir, {h["name"]: h["ip"] for h in hosts}).summary()
    update_summary(out_dir, {"fidelity": fidelity})


def _write_ocs_events(net: HybridNetwork, out_dir: Path, t0: float) -> list[OcsEvent]:
    """ocs_events.csv from the controller's event log, which is there whether or not the controller still runs;
    times in seconds after t0 (the workload's start, as every result time)."""
    events = read_event_log(net.event_log)
    _write_csv(out_dir / "ocs_events.csv", OCS_EVENT_FIELDS, [event.csv_row(t0) for event in events])
    return events


def _write_csv(path: Path, fields: list[str], rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
