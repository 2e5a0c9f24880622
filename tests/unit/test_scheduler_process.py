"""The central scheduler process of an emulated run, driven over its real control socket by scripted agents
(no network, no root): registration, input placement, launches, notices, results, a lost worker."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from hybridbed.experiments.scenarios import validate_scenario
from hybridbed.experiments.scheduler_process import SchedulerServer
from hybridbed.workers.pacing import write_bytes
from hybridbed.workers.protocol import SOCKET_NAME, Channel

HOSTS = ["r0h0", "r1h0"]


def scenario(jobs: int = 3) -> dict:
    return {
        "name": "process",
        "seed": 4,
        "scale": 0.001,
        "fabric": {"racks": 2, "hosts_per_rack": 1},
        "workers": {"slots_per_host": 2, "heartbeat_s": 0.2},
        "workload": {"jobs": jobs, "max_shuffle_gb": 2},
        "scheduler": {"policy": "fifo", "heartbeat_timeout_s": 1.0, "replicas": 2},
        "max_duration_s": 60,
    }


class ScriptedAgent:
    """A worker agent that stores the input blocks it is sent and runs every task it is given at once: it
    reports a fetch for a map's remote input, and the task finished."""

    def __init__(self, socket_path: str, host: str, rack: int, data_dir: Path, die_after_launches: int | None = None):
        self.channel = Channel.connect_unix(socket_path)
        self.host, self.rack, self.data_dir = host, rack, data_dir
        self.launches: list[dict] = []
        self.notices: list[dict] = []
        self.die_after_launches = die_after_launches
        self.stopped = threading.Event()

    def start(self) -> None:
        self.channel.send(
            {
                "op": "register",
                "host": self.host,
                "rack": self.rack,
                "ip": f"10.0.{self.rack}.1",
                "slots": 2,
                "cores": 2.0,
                "memory_mb": 2048.0,
                "pid": 1,
            }
        )
        threading.Thread(target=self._beat, daemon=True).start()
        threading.Thread(target=self._serve, daemon=True).start()

    def _beat(self) -> None:
        while not self.stopped.wait(0.2):
            try:
                self.channel.send(
                    {
                        "op": "heartbeat",
                        "host": self.host,
                        "running": 0,
                        "cpu_percent": 0.0,
                        "rss_mb": 0.0,
                        "time": time.time(),
                        "io_read_mbps": 0.0,
                        "io_write_mbps": 0.0,
                        "net_in_mbps": 0.0,
                        "net_out_mbps": 0.0,
                        "disk_read_mbps": 0.0,
                        "disk_write_mbps": 0.0,
                    }
                )
            except OSError:
                return

    def _serve(self) -> None:
        while (message := self.channel.receive()) is not None:
            if message["op"] == "shutdown":
                break
            if message["op"] == "notice":
                self.notices.append(message)
            if message["op"] == "store":  # keeps the input replicas, as an agent does, and says so
                for block in message["blocks"]:
                    write_bytes(self.data_dir / block["path"], block["bytes"])
                self.channel.send({"op": "stored", "host": self.host, "job": message["job"]})
            if message["op"] != "launch":
                continue
            task = message["task"]
            self.launches.append(task)
            if self.die_after_launches is not None and len(self.launches) > self.die_after_launches:
                break  # dies holding the task: the scheduler must run it elsewhere
            ident = {"task_id": task["task_id"], "attempt": task["attempt"], "host": self.host}
            now = time.time()
            self.channel.send(
                {
                    "op": "finished",
                    **ident,
                    "event": "done",
                    "read_local_bytes": 0,
                    "read_remote_bytes": 0,
                    "fetched_bytes": 0,
                    "written_bytes": task["output_bytes"],
                    "time": now,
                }
            )
        self.stopped.set()
        self.channel.close()


def write_layout(out_dir: Path, data: dict) -> tuple[str, dict[str, Path]]:
    """The run directory a scheduler process starts from: its scenario and the cluster's layout."""
    out_dir.mkdir()
    (out_dir / "scenario.json").write_text(validate_scenario(data).model_dump_json())
    socket_path = str(out_dir / SOCKET_NAME)
    data_dirs = {h: out_dir / "hosts" / h for h in HOSTS}
    hosts = [{"name": h, "rack": r, "ip": f"10.0.{r}.1", "data_dir": str(data_dirs[h])} for r, h in enumerate(HOSTS)]
    (out_dir / "cluster.json").write_text(json.dumps({"socket": socket_path, "controller_port": None, "hosts": hosts}))
    return socket_path, data_dirs


def start_scheduler(out_dir: Path, data: dict) -> tuple[subprocess.Popen, str, dict[str, Path]]:
    socket_path, data_dirs = write_layout(out_dir, data)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hybridbed.experiments.scheduler_process", str(out_dir)],
        stdout=(out_dir / "scheduler.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while not Path(socket_path).exists():
        assert proc.poll() is None, (out_dir / "scheduler.log").read_text()
        assert time.monotonic() < deadline, "the scheduler did not listen"
        time.sleep(0.05)
    return proc, socket_path, data_dirs


@pytest.fixture
def short_dir():
    """Unix socket paths are limited to 108 bytes: pytest's tmp_path can be longer."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="hb-") as name:
        yield Path(name)


def test_the_scheduler_process_runs_a_workload_over_its_control_socket(short_dir):
    proc, socket_path, data_dirs = start_scheduler(short_dir / "run", scenario())
    agents = [ScriptedAgent(socket_path, h, r, data_dirs[h]) for r, h in enumerate(HOSTS)]
    for agent in agents:
        agent.start()
    assert proc.wait(timeout=60) == 0, (short_dir / "run" / "scheduler.log").read_text()

    out = short_dir / "run"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "done" and summary["jobs_done"] == summary["jobs_total"] == 3
    tasks = pd.read_csv(out / "tasks.csv")
    launched = [t for a in agents for t in a.launches]
    assert len(tasks) == len(launched) and set(tasks["host"]) <= set(HOSTS)
    for task in launched:  # launch messages carry what a worker needs to run the task
        if task["kind"] == "map":
            assert task["input"]["sources"] and {s["host"] for s in task["input"]["sources"]} <= set(HOSTS)
            block = task["input"]["path"]  # written to its replica holders before the job ran
            assert any((data_dirs[s["host"]] / block).is_file() for s in task["input"]["sources"])
        else:
            assert task["n_sources"] >= 1 and task["seed"] == 4  # the scenario's: the fetchers draw as simulated
    reduces = {t["task_id"] for t in launched if t["kind"] != "map"}
    told = {n["key"].rsplit(".a", 1)[0] for a in agents for n in a.notices}
    assert reduces and told <= reduces  # notices go to reducers, where their parents' output is
    progress = json.loads((out / "progress.json").read_text())
    assert progress["final"] and progress["jobs_done"] == 3


def test_a_worker_that_dies_holding_tasks_has_them_run_elsewhere(short_dir):
    proc, socket_path, data_dirs = start_scheduler(short_dir / "run", scenario(jobs=2))
    dying = ScriptedAgent(socket_path, HOSTS[0], 0, data_dirs[HOSTS[0]], die_after_launches=0)
    healthy = ScriptedAgent(socket_path, HOSTS[1], 1, data_dirs[HOSTS[1]])
    dying.start()
    healthy.start()
    assert proc.wait(timeout=60) == 0, (short_dir / "run" / "scheduler.log").read_text()
    assert dying.launches, "the dying worker was given a task"
    lost = {t["task_id"] for t in dying.launches}
    tasks = pd.read_csv(short_dir / "run" / "tasks.csv")
    assert lost <= set(tasks["task_id"]) and set(tasks["host"]) == {HOSTS[1]}  # ran again on the live host
    assert "lost" in (short_dir / "run" / "scheduler.log").read_text()


def test_a_step_of_the_wall_clock_loses_no_worker(short_dir, monkeypatch):
    """The heartbeats' timeout is a duration: setting the clock (NTP, a virtual machine resumed) must not make
    every worker look silent."""
    out = short_dir / "run"
    write_layout(out, scenario())
    server = SchedulerServer(out)
    for host in HOSTS:
        server.events.put(("register", {"host": host, "channel": None}))
    server._await_workers()
    stepped = time.time() + 3600.0
    monkeypatch.setattr(time, "time", lambda: stepped)
    server._check_heartbeats()
    assert sorted(server.last_seen) == HOSTS
