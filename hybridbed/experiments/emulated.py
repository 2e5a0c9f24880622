"""One emulated run of a scenario under one policy: network, controller, scheduler, workers, results.

The run directory gets the resolved scenario first, then results as they happen (the scheduler's CSVs,
`links.csv` from the switches' port counters every second, `ocs_events.csv` at the end) and the logs
of the scheduler and every worker. Whatever ends the run (success, a failure, Ctrl-C), the processes
are stopped, the network is torn down and what was written stays.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from hybridbed.config.scenario import Scenario
from hybridbed.controller.client import DEFAULT_REST_PORT, ControllerError
from hybridbed.controller.events import OCS_EVENT_FIELDS, OcsEvent, read_event_log
from hybridbed.experiments.run_failed import RunFailed
from hybridbed.results.path_accounting import annotate_flows, uplink_bytes
from hybridbed.results.progress import Progress, read_progress
from hybridbed.results.summary import add_flow_totals, add_uplink_totals, mark_status, summarize
from hybridbed.testbed.interrupts import deferred_interrupts
from hybridbed.testbed.network import HybridNetwork, NetworkStartError
from hybridbed.workers.cgroups import CgroupLayout
from hybridbed.workers.protocol import SOCKET_NAME
from hybridbed.workloads.build import build_workload

POLL_S = 1.0
LINK_FIELDS = ["time_s", "switch", "port", "link", "tx_bytes", "rx_bytes"]


def _link_names(net: HybridNetwork) -> dict[tuple[str, int], str]:
    """What each counted switch port is: a ToR's EPS uplink or OCS port (the links the paper splits bytes over)."""
    plan = net.plan
    names = {}
    for rack in range(plan.racks):
        names[(f"tor{rack}", plan.tor_eps_port)] = f"tor{rack}-eps"
        if net.fabric.has_ocs:
            for k in range(plan.ocs_ports_per_tor):
                names[(f"tor{rack}", plan.tor_ocs_port(k))] = f"tor{rack}-ocs{k}"
    return names


STOP_GRACE_S = 10.0  # a process's time to exit on SIGTERM (the scheduler writes its summary) before SIGKILL


def run_scenario(scenario: Scenario, out_dir: Path, on_progress: Callable[[Progress], None] | None = None) -> dict:
    """Run the scenario's workload under its policy; returns summary.json's content. Raises RunFailed."""
    out_dir.mkdir(parents=True, exist_ok=False)
    (out_dir / "scenario.json").write_text(scenario.model_dump_json(indent=2))
    net = HybridNetwork(scenario.fabric, scenario.scaled_ocs())
    try:
        net.start()
    except NetworkStartError as err:
        raise RunFailed(str(err)) from err
    processes: list[subprocess.Popen] = []
    status = "failed"
    t0 = time.time()
    try:
        layout = CgroupLayout.detect()
        roots = layout.create_task_roots(net.run_id)
        net.record.set(cgroups=net.record.manifest.cgroups + [str(r) for r in roots])
        state = net.record.state_dir
        hosts = [
            {"name": a.name, "rack": a.rack, "ip": a.ip, "data_dir": str(state / "hosts" / a.name)}
            for a in net.plan.hosts()
        ]
        socket_path = str(state / SOCKET_NAME)
        task_cgroups = {"roots": [str(r) for r in roots], "version": layout.version}
        (out_dir / "cluster.json").write_text(
            json.dumps(
                {
                    "socket": socket_path,
                    "controller_port": DEFAULT_REST_PORT,
                    "hosts": hosts,
                    "task_cgroups": task_cgroups,
                },
                indent=2,
            )
        )
        scheduler = subprocess.Popen(
            [sys.executable, "-m", "hybridbed.experiments.scheduler_process", str(out_dir)],
            stdout=(out_dir / "scheduler.log").open("w"),
            stderr=subprocess.STDOUT,
            preexec_fn=net.cgroup.join_self,
        )
        processes.append(scheduler)
        net.record.add_process(scheduler.pid, "scheduler")
        _wait_for_socket(socket_path, scheduler)
        (out_dir / "workers").mkdir()
        w = scenario.workers
        for host in hosts:
            node = net.net.get(host["name"])
            cmd = [
                sys.executable,
                "-m",
                "hybridbed.workers.agent",
                "--scheduler-socket",
                socket_path,
                "--host",
                host["name"],
                "--rack",
                str(host["rack"]),
                "--ip",
                host["ip"],
                "--slots",
                str(w.slots_per_host),
                "--cores",
                str(w.cores_per_host),
                "--memory-mb",
                str(w.memory_mb_per_host),
                "--data-dir",
                host["data_dir"],
                "--cgroup-roots",
                *(str(_seen_from_hosts(r)) for r in roots),
                "--cgroup-version",
                str(layout.version),
                "--compute-mode",
                w.compute,
                "--heartbeat-s",
                str(w.heartbeat_s),
            ]
            proc = node.popen(
                cmd, stdout=(out_dir / "workers" / f"{host['name']}.log").open("w"), stderr=subprocess.STDOUT
            )
            processes.append(proc)
            net.record.add_process(proc.pid, f"worker {host['name']}")
        code = _follow(net, scheduler, out_dir, scenario, on_progress)
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
                events = _write_ocs_events(net, out_dir, t0)
                if not (out_dir / "summary.json").exists() and (out_dir / "jobs.csv").exists():
                    summarize(out_dir, len(build_workload(scenario)), status)  # the scheduler died before its own
                _account_paths(out_dir, events, scenario.scaled_ocs().elephant_threshold_bytes)
            finally:
                net.stop(status=status)
            if status == "interrupted":  # the scheduler, stopped by SIGTERM, could only say it failed
                mark_status(out_dir, status)
    return json.loads((out_dir / "summary.json").read_text())


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


def _seen_from_hosts(path: Path) -> Path:
    """Mininet hosts run in a mount namespace of their own with a fresh /sys, where the cgroup hierarchies
    are not mounted; a worker reaches them through this process's root, which is in the original one."""
    return Path(f"/proc/{os.getpid()}/root") / path.relative_to("/")


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
    on_progress: Callable[[Progress], None] | None,
) -> int:
    """Until the scheduler ends: sample the switch port counters into links.csv, report progress."""
    names = _link_names(net)
    started = time.time()
    with (out_dir / "links.csv").open("w", newline="") as links_file:
        links = csv.DictWriter(links_file, fieldnames=LINK_FIELDS)
        links.writeheader()
        while scheduler.poll() is None:
            if time.time() - started > scenario.max_duration_s + 120:
                raise RunFailed(f"the scheduler is still running {scenario.max_duration_s + 120:g} s into the run")
            _sample_links(net, names, links, started)
            links_file.flush()
            if on_progress is not None and (progress := read_progress(out_dir)) is not None:
                on_progress(progress)
            time.sleep(POLL_S)
        _sample_links(net, names, links, started)
    return scheduler.returncode


def _sample_links(net: HybridNetwork, names: dict[tuple[str, int], str], links: csv.DictWriter, started: float) -> None:
    now = round(time.time() - started, 3)
    try:
        counters_by_switch = net.controller.ports()
    except (ControllerError, OSError):  # the controller is being restarted: this sample is missing from links.csv
        return
    for switch, ports in counters_by_switch.items():
        for port, counters in ports.items():
            link = names.get((switch, int(port)))
            if link is not None:
                links.writerow(
                    {
                        "time_s": now,
                        "switch": switch,
                        "port": port,
                        "link": link,
                        "tx_bytes": counters["tx_bytes"],
                        "rx_bytes": counters["rx_bytes"],
                    }
                )


def _account_paths(out_dir: Path, events: list[OcsEvent], elephant_bytes: float) -> None:
    """Add each flow's path and OCS bytes to flows.csv, and the EPS/OCS byte split, all traffic and shuffle
    apart, to summary.json."""
    summary_path, flows_path, links_path = (out_dir / n for n in ("summary.json", "flows.csv", "links.csv"))
    if not summary_path.exists():
        return
    summary = json.loads(summary_path.read_text())
    if "started_at_unix" not in summary:  # made for a scheduler that died: flow times cannot be placed on the clock
        return
    flows = pd.read_csv(flows_path)
    annotate_flows(flows, events, summary["started_at_unix"]).to_csv(flows_path, index=False)
    eps, ocs = uplink_bytes(pd.read_csv(links_path)) if links_path.exists() else (0, 0)
    add_uplink_totals(out_dir, eps, ocs, len(events))
    add_flow_totals(out_dir, elephant_bytes)


def _write_ocs_events(net: HybridNetwork, out_dir: Path, t0: float) -> list[OcsEvent]:
    """ocs_events.csv from the controller's event log, which is there whether or not the controller still runs."""
    events = read_event_log(net.event_log)
    with (out_dir / "ocs_events.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=OCS_EVENT_FIELDS)
        writer.writeheader()
        for event in events:
            writer.writerow(event.csv_row(t0))
    return events
