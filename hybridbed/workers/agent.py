"""The worker agent: one per emulated host, inside that host's network namespace.

It registers with the scheduler over the control channel, heartbeats with the usage of its tasks
(psutil), serves its data (input replicas, map outputs) over TCP on the data network, and runs every
task attempt as a process of its own in a cgroup with the task's CPU quota and memory limit. Where a policy
over-commits the host's cores, the tasks computing share them as Linux would on a host of that many cores
(`workers.host_cpu`): each gets its max-min share, through its cgroup's quota and its pace of compute.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import cast

import psutil

from hybridbed.workers.cgroups import TaskCgroup
from hybridbed.workers.fetch import DataServer
from hybridbed.workers.host_cpu import HostCpu
from hybridbed.workers.protocol import (
    Channel,
    FailedMessage,
    FetchMessage,
    FinishedMessage,
    HeartbeatMessage,
    RegisterMessage,
    StartedMessage,
    TaskControlMessage,
    TaskDescription,
    task_key,
)


class RunningTask:
    def __init__(self, key: str, proc: subprocess.Popen, cgroup: TaskCgroup, cores: float):
        self.key = key
        self.proc = proc
        self.cgroup = cgroup
        self.cores = cores  # its allocated cores (its share's, after a change)
        self.computing = False
        self.frozen = False
        self.stdin_lock = threading.Lock()
        self.suspensions = 0  # a resumption thaws only if no suspension came after it was asked for


class WorkerAgent:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.data_dir = Path(args.data_dir)
        self.channel = Channel.connect_unix(args.scheduler_socket)
        self.tasks: dict[str, RunningTask] = {}
        self.cpu = HostCpu(args.cores)
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self) -> int:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        DataServer(self.args.ip, self.data_dir).start()
        register: RegisterMessage = {
            "op": "register",
            "host": self.args.host,
            "rack": self.args.rack,
            "ip": self.args.ip,
            "slots": self.args.slots,
            "cores": self.args.cores,
            "memory_mb": self.args.memory_mb,
            "pid": psutil.Process().pid,
        }
        self.channel.send(register)
        threading.Thread(target=self._heartbeat, daemon=True).start()
        try:
            while (message := self.channel.receive()) is not None:
                op = message["op"]
                if op == "launch":
                    self._launch(message["task"])
                elif op == "notice":
                    self._notify(message["key"], message["notice"])
                elif op in ("suspend", "resume", "kill", "share"):
                    self._act(op, message)
                elif op == "shutdown":
                    break
        finally:
            self.stopping.set()
            with self.lock:
                running = list(self.tasks.values())
            for task in running:
                task.proc.kill()
                task.cgroup.remove()
        return 0

    def _heartbeat(self) -> None:
        """Every heartbeat: the tasks' CPU, memory and I/O (bytes read and written through syscalls, files
        and sockets alike) and this host's NIC traffic, as rates over the last interval."""
        last_io: dict[int, tuple[int, int]] = {}
        last_net, last_time = self._nic_bytes(), time.monotonic()
        while not self.stopping.wait(self.args.heartbeat_s):
            with self.lock:
                procs = [t.proc.pid for t in self.tasks.values()]
            cpu = rss = read = written = 0.0
            io_now: dict[int, tuple[int, int]] = {}
            for pid in procs:
                try:
                    p = psutil.Process(pid)
                    cpu += p.cpu_percent(interval=None)
                    rss += p.memory_info().rss
                    io = p.io_counters()
                except psutil.Error:
                    continue
                io_now[pid] = (io.read_chars, io.write_chars)
                before = last_io.get(pid, (0, 0))
                read += io.read_chars - before[0]
                written += io.write_chars - before[1]
            net, now = self._nic_bytes(), time.monotonic()
            received, sent = net[0] - last_net[0], net[1] - last_net[1]
            to_mbps = 8 / 1e6 / max(now - last_time, 1e-3)
            last_io, last_net, last_time = io_now, net, now
            try:
                beat: HeartbeatMessage = {
                    "op": "heartbeat",
                    "host": self.args.host,
                    "running": len(procs),
                    "cpu_percent": cpu,
                    "rss_mb": rss / 1e6,
                    "time": time.time(),
                    "io_read_mbps": read * to_mbps,
                    "io_write_mbps": written * to_mbps,
                    "net_in_mbps": received * to_mbps,
                    "net_out_mbps": sent * to_mbps,
                }
                self.channel.send(beat)
            except OSError:
                return

    @staticmethod
    def _nic_bytes() -> tuple[int, int]:
        """Bytes received and sent by this host's interfaces (its network namespace's), loopback aside."""
        counters = psutil.net_io_counters(pernic=True)
        return (
            sum(c.bytes_recv for nic, c in counters.items() if nic != "lo"),
            sum(c.bytes_sent for nic, c in counters.items() if nic != "lo"),
        )

    def _launch(self, task: TaskDescription) -> None:
        key = task_key(task["task_id"], task["attempt"])
        cgroup = TaskCgroup([Path(p) for p in self.args.cgroup_roots], self.args.cgroup_version, key)
        cores = task["share"]["cores"] if "share" in task else task["cores"]
        cgroup.create(cores, task["memory_mb"])
        run = {**task, "data_dir": str(self.data_dir), "compute_mode": self.args.compute_mode}
        proc = subprocess.Popen(
            [sys.executable, "-m", "hybridbed.workers.task"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=cgroup.join_self,
        )
        proc.stdin.write(json.dumps(run) + "\n")
        proc.stdin.flush()
        running = RunningTask(key, proc, cgroup, cores)
        with self.lock:
            self.tasks[key] = running
        started: StartedMessage = {
            "op": "started",
            "task_id": task["task_id"],
            "attempt": task["attempt"],
            "pid": proc.pid,
            "cgroups": [str(p) for p in cgroup.paths],
            "time": time.time(),
        }
        self.channel.send(started)
        threading.Thread(target=self._follow, args=(task, running), daemon=True).start()

    def _notify(self, key: str, notice: dict) -> None:
        with self.lock:
            running = self.tasks.get(key)
        if running is not None:
            self._tell(running, notice)

    @staticmethod
    def _tell(running: RunningTask, line: dict) -> None:
        """One JSON line to the task process (a parent's output location, a new share)."""
        with running.stdin_lock:
            try:
                running.proc.stdin.write(json.dumps(line) + "\n")
                running.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass

    def _act(self, op: str, message: TaskControlMessage) -> None:
        """Suspend (freeze), resume (thaw, after the recovery overhead), kill, or re-quota a task. A task
        that ended meanwhile is left alone: the scheduler hears how it ended from _follow."""
        with self.lock:
            running = self.tasks.get(message["key"])
        if running is None:
            return
        try:
            if op == "suspend":
                running.suspensions += 1
                running.cgroup.freeze()
                running.frozen = True
                self._share_cores(running)
            elif op == "resume":
                threading.Thread(
                    target=self._resume, args=(running, running.suspensions, message["overhead_s"]), daemon=True
                ).start()
            elif op == "kill":
                running.proc.kill()
                if running.suspensions:
                    running.cgroup.thaw()  # a frozen process dies only once thawed
            else:
                running.cores = message["share"]["cores"]
                running.cgroup.set_cores(running.cores)
                self._tell(running, {"share": message["share"]})  # it paces its compute and transfers anew
                self._share_cores(running)
        except FileNotFoundError:  # its cgroup went with it
            pass

    def _resume(self, running: RunningTask, suspensions: int, overhead_s: float) -> None:
        time.sleep(overhead_s)
        if running.suspensions == suspensions:
            with contextlib.suppress(FileNotFoundError):
                running.cgroup.thaw()
                running.frozen = False
                self._share_cores(running)

    def _share_cores(self, running: RunningTask) -> None:
        """The task started or stopped computing, was frozen or thawed, got a new share or ended: share the
        host's cores anew among the tasks computing, and give each task whose cores changed its new quota and
        pace. Under the lock, so that two changes cannot reach a task in the wrong order."""
        with self.lock:
            computing = running.computing and not running.frozen and running.key in self.tasks
            changed = self.cpu.set(running.key, running.cores if computing else None)
            if not computing and running.key in self.tasks:
                changed[running.key] = running.cores  # its quota back for whatever it does next
            for key, cores in changed.items():
                task = self.tasks.get(key)
                if task is None:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    task.cgroup.set_cores(cores)
                self._tell(task, {"cpu": cores})

    def _follow(self, task: TaskDescription, running: RunningTask) -> None:
        """Forward the task's records to the scheduler; report how it ended; remove its cgroup."""
        ident = {"task_id": task["task_id"], "attempt": task["attempt"], "host": self.args.host}
        done = None
        for line in running.proc.stdout:
            record = json.loads(line)
            if record["event"] == "compute":
                running.computing = record["computing"]
                self._share_cores(running)
            elif record["event"] == "fetch":
                self.channel.send(cast(FetchMessage, {"op": "fetch", **ident, **record}))
            elif record["event"] == "done":
                done = record
        code = running.proc.wait()
        error = running.proc.stderr.read()[-2000:]
        with self.lock:
            self.tasks.pop(running.key, None)
        self._share_cores(running)
        running.cgroup.remove()
        if self.stopping.is_set():
            return
        if code == 0 and done is not None:
            self.channel.send(cast(FinishedMessage, {"op": "finished", **ident, **done, "time": time.time()}))
        else:
            failed: FailedMessage = {
                "op": "failed",
                "task_id": task["task_id"],
                "attempt": task["attempt"],
                "host": self.args.host,
                "exit_code": code,
                "error": error,
                "time": time.time(),
            }
            self.channel.send(failed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hybridbed worker agent (runs inside one emulated host)")
    parser.add_argument("--scheduler-socket", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--rack", type=int, required=True)
    parser.add_argument("--ip", required=True)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--cores", type=float, required=True)
    parser.add_argument("--memory-mb", type=float, required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--cgroup-roots", nargs="+", required=True)
    parser.add_argument("--cgroup-version", type=int, choices=[1, 2], required=True)
    parser.add_argument("--compute-mode", choices=["sleep", "cpu"], default="sleep")
    parser.add_argument("--heartbeat-s", type=float, default=0.5)
    return WorkerAgent(parser.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
