"""Real MapReduce jobs on the emulated network: workers in the Mininet hosts, tasks in their own cgroups,
shuffle bytes over TCP through the ToRs, EPS and OCS."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from hybridbed.experiments.emulated import run_scenario
from hybridbed.experiments.run_failed import RunFailed
from hybridbed.scheduler.assembly import container
from hybridbed.scheduler.model import build_job
from hybridbed.testbed.runs import STATE_ROOT, recorded_runs
from hybridbed.workers.cgroups import CgroupLayout, TaskCgroup
from hybridbed.workloads.build import build_workload

from .conftest import run_cli

MB = 1_000_000


def test_job_completes_and_every_reducer_fetches_exactly_its_bytes(tmp_path, small_scenario):
    s = small_scenario()
    out = tmp_path / "run"
    summary = run_scenario(s, out)
    assert summary["status"] == "done" and summary["jobs_done"] == 1, summary
    (spec,) = build_workload(s)
    expected = {r.task_id: r.fetch_bytes for r in build_job(spec, container(s)).reduces}
    tasks = pd.read_csv(out / "tasks.csv")
    reduces = tasks[tasks.kind == "reduce"].set_index("task_id")
    assert reduces["fetched_bytes"].to_dict() == expected
    assert sum(expected.values()) == 2 * MB
    flows = pd.read_csv(out / "flows.csv")
    shuffle = flows[flows.kind == "shuffle"]
    assert shuffle.groupby("task_id")["bytes"].sum().to_dict() == expected
    map_hosts = set(tasks[tasks.kind == "map"].host)
    for _, connections in shuffle.groupby("task_id"):  # a connection per map host, or more if outputs came later
        assert set(connections.src_host) == map_hosts and len(map_hosts) <= len(connections) <= 4
    links = pd.read_csv(out / "links.csv")
    assert {"tor0-eps", "tor1-eps", "tor0-ocs0", "tor1-ocs0"} <= set(links.link)
    # pinned mode with no circuit: every cross-rack byte rides the EPS, and the counters agree (where
    # the tasks land is the scheduler's choice, so there may be no cross-rack flow at all)
    cross = flows[flows.src_rack != flows.dst_rack]
    assert set(cross.path) <= {"eps"} and set(flows[flows.src_rack == flows.dst_rack].path) <= {"rack"}
    assert summary["ocs_uplink_bytes"] == 0 and summary["all_traffic_ocs_share"] == 0
    assert summary["eps_uplink_bytes"] >= cross.bytes.sum()
    usage = pd.read_csv(out / "usage.csv")
    assert set(usage.host) == {"r0h0", "r0h1", "r1h0", "r1h1"} and usage.running_tasks.max() >= 1
    assert (usage.io_read_mbps + usage.io_write_mbps).max() > 0  # the tasks' block reads and output writes
    state_dir = Path(json.loads((out / "cluster.json").read_text())["socket"]).parent
    assert not state_dir.exists(), "the run's state (data directories, sockets) goes with the run"


def _task_cgroups(layout: CgroupLayout, ignore: frozenset[Path] = frozenset()) -> list[Path]:
    """Task cgroups in the first hierarchy, apart from those in `ignore` (another run's on a shared machine)."""
    found = [p for h in layout.hierarchies[:1] for p in (h / "hybridbed").glob("*-tasks/*") if p.is_dir()]
    return [p for p in found if p.parent not in ignore]


def test_running_task_holds_its_cpu_quota_and_memory_limit(tmp_path, small_scenario):
    s = small_scenario(compute_s=6.0, container={"cores": 0.5, "memory_mb": 128})
    layout = CgroupLayout.detect()
    others = frozenset(p.parent for p in _task_cgroups(layout))
    seen: list[tuple[float, int]] = []
    runner = threading.Thread(target=run_scenario, args=(s, tmp_path / "run"))
    runner.start()
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline:
        for path in _task_cgroups(layout, ignore=others):
            name = path.name
            roots = [h / "hybridbed" / path.parent.name for h in layout.hierarchies]
            try:
                cgroup = TaskCgroup(roots, layout.version, name)
                if cgroup.pids():
                    seen.append(cgroup.limits())
            except (FileNotFoundError, ValueError):
                pass
        time.sleep(0.2)
    runner.join()
    assert seen, "no running task cgroup was seen"
    cores, memory = seen[0]
    assert cores == pytest.approx(0.5)
    assert memory == 128 * 1024 * 1024
    assert not _task_cgroups(layout, ignore=others), "task cgroups must go with the run"


def test_killing_a_worker_mid_job_still_completes_the_job(tmp_path, small_scenario):
    s = small_scenario(compute_s=3.0)
    out = tmp_path / "run"
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(run_scenario(s, out)))
    runner.start()
    victim = victim_host = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:
        tasks = out / "tasks.csv"
        done = pd.read_csv(tasks) if tasks.exists() else pd.DataFrame()
        if len(done):  # a map is done: its output lives on its host until the reducers have it
            victim_host = done.host.iloc[0]
            for manifest in recorded_runs():
                workers = [p for p in manifest.processes if p.role == f"worker {victim_host}" and p.is_alive()]
                if workers:
                    victim = workers[0].pid
        time.sleep(0.2)
    assert victim is not None, "the run never got going"
    os.kill(victim, signal.SIGKILL)
    runner.join()
    assert result["status"] == "done" and result["jobs_done"] == 1
    tasks = pd.read_csv(out / "tasks.csv")
    rerun = tasks[tasks.attempt >= 1]
    assert len(rerun), "the map output on the lost host should have been computed again"
    assert victim_host not in set(rerun.host)


def _parent(process: psutil.Process) -> int | None:
    """Its parent's pid (None: it has ended)."""
    try:
        return process.ppid()
    except psutil.NoSuchProcess:
        return None


def test_a_lost_workers_task_processes_are_ended_and_its_tasks_run_again(tmp_path, small_scenario):
    s = small_scenario(compute_s=20.0)  # a task outlives the wait below unless it is ended
    out = tmp_path / "run"
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(run_scenario(s, out)))
    runner.start()
    victim, orphans = None, []
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:  # a worker with a task running
        for manifest in recorded_runs():
            for record in manifest.processes:
                if record.role.startswith("worker ") and record.is_alive():
                    children = psutil.Process(record.pid).children(recursive=True)
                    if any(_parent(child) not in (None, record.pid) for child in children):  # its launcher's: tasks
                        victim, orphans = record.pid, children
                        break
        time.sleep(0.2)
    assert victim is not None, "no worker ever ran a task"
    os.kill(victim, signal.SIGKILL)
    _, alive = psutil.wait_procs(orphans, timeout=s.scheduler.heartbeat_timeout_s + 5)
    assert not alive, f"task processes of the lost worker still run: {alive}"
    assert runner.is_alive(), "the run should still be going when the orphans are ended"
    runner.join()
    assert result["status"] == "done" and result["jobs_done"] == 1
    assert result["tasks_retried"] >= 1


def test_a_run_goes_on_when_its_controller_is_killed(tmp_path, small_scenario):
    s = small_scenario(compute_s=3.0, jobs=2)
    s = s.model_copy(update={"ocs": s.ocs.model_copy(update={"mode": "periodic", "demand_source": "measured"})})
    out = tmp_path / "run"
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(run_scenario(s, out)))
    runner.start()
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and time.monotonic() < deadline:
        if (out / "tasks.csv").exists() and len(pd.read_csv(out / "tasks.csv")):  # the workload is under way
            for manifest in recorded_runs():
                controllers = [p for p in manifest.processes if p.role == "controller" and p.is_alive()]
                if controllers and (out / "cluster.json").exists():
                    os.kill(controllers[0].pid, signal.SIGKILL)
                    killed = manifest
        time.sleep(0.2)
    assert killed is not None, "the run never got going"
    restarted = False
    while runner.is_alive() and not restarted:
        records = [p for m in recorded_runs() if m.run_id == killed.run_id for p in m.processes]
        restarted = sum(p.role == "controller" for p in records) == 2
        time.sleep(0.2)
    runner.join()
    assert restarted, "the controller was not started again"
    assert result["status"] == "done" and result["jobs_done"] == 2
    events = pd.read_csv(out / "ocs_events.csv")
    assert len(events) and list(events.seq) == list(range(len(events)))  # one log across both controllers


def test_a_killed_scheduler_fails_the_run_with_its_results_kept_and_nothing_left(tmp_path, small_scenario):
    s = small_scenario(compute_s=3.0, jobs=2)
    out = tmp_path / "run"
    failure: list[BaseException] = []

    def run() -> None:
        try:
            run_scenario(s, out)
        except RunFailed as err:
            failure.append(err)

    runner = threading.Thread(target=run)
    runner.start()
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and time.monotonic() < deadline:
        if (out / "tasks.csv").exists() and len(pd.read_csv(out / "tasks.csv")):
            for manifest in recorded_runs():
                schedulers = [p for p in manifest.processes if p.role == "scheduler" and p.is_alive()]
                if schedulers:
                    os.kill(schedulers[0].pid, signal.SIGKILL)
                    killed = manifest
        time.sleep(0.2)
    runner.join()
    assert killed is not None, "the run never got going"
    assert failure and "scheduler exited" in str(failure[0])
    summary = json.loads((out / "summary.json").read_text())  # made from the CSVs the scheduler left
    assert summary["status"] == "failed" and summary["jobs_done"] < 2
    assert not Path(killed.state_dir).exists() and not any(p.is_alive() for p in killed.processes)


def test_per_task_rate_cap_paces_the_shuffle(tmp_path, small_scenario):
    cap = 0.25  # the two reducers together stay under a 2 Mb/s EPS uplink even if all crossed the same one
    s = small_scenario(task_rate_cap_mbps=cap)
    out = tmp_path / "run"
    assert run_scenario(s, out)["jobs_done"] == 1
    flows = pd.read_csv(out / "flows.csv")
    shuffle = flows[flows.kind == "shuffle"].groupby("task_id")  # its own host's outputs count too
    mbps = shuffle.bytes.sum() * 8 / (shuffle.end_s.max() - shuffle.start_s.min()) / 1e6
    assert len(mbps) == 2 and (shuffle.size() >= 2).all()
    assert mbps.max() <= cap * 1.1, mbps.tolist()  # the reducer's connections together, not each one
    assert mbps.min() >= cap * 0.7, mbps.tolist()


def test_bad_scenario_is_refused_and_leaves_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nfabric: {racks: 0, hosts_per_rack: 2}\n")
    before = sorted(STATE_ROOT.glob("*")) if STATE_ROOT.exists() else []
    proc = run_cli("run", str(bad), "--out", str(tmp_path / "out"), timeout=60)
    assert proc.returncode == 2
    assert "fabric.racks" in proc.stderr
    assert not (tmp_path / "out").exists()
    assert (sorted(STATE_ROOT.glob("*")) if STATE_ROOT.exists() else []) == before
