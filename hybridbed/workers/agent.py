"""The worker agent: one per emulated host, inside that host's network namespace.

It registers with the scheduler over the control channel, heartbeats with the usage of its tasks
(psutil), serves its data (input replicas, map outputs) over TCP on the data network, and runs every
task attempt as a process of its own in a cgroup with the task's CPU quota and memory limit, forked by its
task launcher (`workers.launcher`), which has the task code imported already.

It shares the host's cores and (where the scenario gives hosts a disk bandwidth) its disk reads and writes
among the tasks using them (`workers.host_share`): each task says when it computes, reads its block or
writes its output, and the agent gives every task whose share changed its new one (the cores through its
cgroup's quota and its pace of compute, disk bandwidth through its token buckets). What its data server
reads for other hosts' fetches is a disk read here too, paced at its share. Where a policy over-commits the
host, its tasks thus share it as they would a host of that size; where nothing is over-committed, each gets
what it was allotted.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import psutil

from hybridbed.workers.cgroups import TaskCgroup
from hybridbed.workers.fetch import DataServer
from hybridbed.workers.host_share import HostShare
from hybridbed.workers.launcher import TaskLauncher, TaskProcess
from hybridbed.workers.pacing import Rate, write_bytes
from hybridbed.workers.protocol import (
    Channel,
    FailedMessage,
    FetchMessage,
    FinishedMessage,
    HeartbeatMessage,
    RegisterMessage,
    StartedMessage,
    StoredBlock,
    StoredMessage,
    TaskControlMessage,
    TaskDescription,
    task_key,
)


class RunningTask:
    def __init__(self, key: str, proc: TaskProcess, cgroup: TaskCgroup, allotted: dict[str, float | None]):
        self.key = key
        self.proc = proc
        self.cgroup = cgroup
        self.allotted = allotted  # cores, disk_read_bps, disk_write_bps: its share's (None: not paced)
        self.using: set[str] = set()  # the host resources it uses now
        self.frozen = False
        self.stdin_lock = threading.Lock()
        self.suspensions = 0  # a resumption thaws only if no suspension came after it was asked for


class WorkerAgent:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.data_dir = Path(args.data_dir)
        self.channel = Channel.connect_unix(args.scheduler_socket)
        self.tasks: dict[str, RunningTask] = {}
        self.shares = {"cores": HostShare(args.cores)}  # a host resource -> who uses it and what each gets
        for resource, mbps in (("disk_read_bps", args.disk_read_mbps), ("disk_write_bps", args.disk_write_mbps)):
            if mbps > 0:
                self.shares[resource] = HostShare(mbps * 1e6)
        self._serving: dict[str, Rate] = {}  # the data server's disk reads under way
        self._serve_keys = itertools.count()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.launcher = TaskLauncher()

    def run(self) -> int:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        reads = self.serving_disk_read if "disk_read_bps" in self.shares else None
        DataServer(self.args.ip, self.data_dir, reads).start()
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
                if op == "store":
                    self._store(message["job"], message["blocks"])
                elif op == "launch":
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
            self.launcher.close()
        return 0

    def _store(self, job: str, blocks: list[StoredBlock]) -> None:
        """Write the input blocks this host keeps replicas of (before any task reads them: the scheduler waits
        for `stored`), unpaced, as an upload into HDFS before the job runs."""
        for block in blocks:
            write_bytes(self.data_dir / block["path"], block["bytes"])
        stored: StoredMessage = {"op": "stored", "host": self.args.host, "job": job}
        self.channel.send(stored)

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
                    "disk_read_mbps": self._disk_in_use("disk_read_bps"),
                    "disk_write_mbps": self._disk_in_use("disk_write_bps"),
                }
                self.channel.send(beat)
            except OSError:
                return

    def _disk_in_use(self, resource: str) -> float:
        """Mb/s of the host's disk given to the streams under way (the resource tracker's disk use, Tetris
        §4.1: every stream is paced at what it is given, so that is what it moves)."""
        with self.lock:
            share = self.shares.get(resource)
            return sum(share.given.values()) / 1e6 if share is not None else 0.0

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
        share = task.get("share") or task
        allotted = {
            "cores": share["cores"],
            "disk_read_bps": share["disk_read_bps"],
            "disk_write_bps": share["disk_write_bps"],
        }
        cgroup.create(share["cores"], task["memory_mb"])
        run = {**task, "data_dir": str(self.data_dir), "compute_mode": self.args.compute_mode}
        proc = self.launcher.start(cgroup.procs_files)
        proc.stdin.write(json.dumps(run) + "\n")
        proc.stdin.flush()
        running = RunningTask(key, proc, cgroup, allotted)
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
            except (OSError, ValueError):  # it has ended
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
                self._share_host(running)
            elif op == "resume":
                threading.Thread(
                    target=self._resume, args=(running, running.suspensions, message["overhead_s"]), daemon=True
                ).start()
            elif op == "kill":
                running.proc.kill()
                if running.suspensions:
                    running.cgroup.thaw()  # a frozen process dies only once thawed
            else:
                share = message["share"]
                running.allotted = {
                    "cores": share["cores"],
                    "disk_read_bps": share.get("disk_read_bps"),
                    "disk_write_bps": share.get("disk_write_bps"),
                }
                running.cgroup.set_cores(share["cores"])
                self._tell(running, {"share": share})  # it paces its compute and transfers anew
                self._share_host(running)
        except FileNotFoundError:  # its cgroup went with it
            pass

    def _resume(self, running: RunningTask, suspensions: int, overhead_s: float) -> None:
        time.sleep(overhead_s)
        if running.suspensions == suspensions:
            with contextlib.suppress(FileNotFoundError):
                running.cgroup.thaw()
                running.frozen = False
                self._share_host(running)

    def _share_host(self, running: RunningTask, resources: list[str] | None = None) -> None:
        """The task started or stopped using some of the host's resources, was frozen or thawed, got a new
        share or ended: share those resources anew among their users, and give each task whose share changed
        its new one. Under the lock, so that two changes cannot reach a task in the wrong order."""
        with self.lock:
            alive = running.key in self.tasks
            for resource in resources or list(self.shares):
                active = alive and not running.frozen and resource in running.using
                allotted = running.allotted[resource]
                quota = allotted if allotted is not None else math.inf  # an unpaced stream: what the disk gives
                changed: dict[str, float | None] = dict(
                    self.shares[resource].set(running.key, quota if active else None)
                )
                if alive and not active:
                    changed[running.key] = allotted  # its allotment back for whatever it does next
                self._give(resource, changed)

    def _give(self, resource: str, changed: dict[str, float | None]) -> None:
        for key, value in changed.items():
            if key in self._serving:
                self._serving[key].bps = value
                continue
            task = self.tasks.get(key)
            if task is None:
                continue
            if resource == "cores":
                with contextlib.suppress(FileNotFoundError):
                    task.cgroup.set_cores(value or 0.0)
            self._tell(task, {"given": {resource: value}})

    @contextlib.contextmanager
    def serving_disk_read(self) -> Iterator[Rate]:
        """A read of this host's disk for another host's fetch, for as long as it lasts: the rate it gets."""
        key, rate = f"serve-{next(self._serve_keys)}", Rate(None)
        with self.lock:
            self._serving[key] = rate
            self._give("disk_read_bps", dict(self.shares["disk_read_bps"].set(key, math.inf)))
        try:
            yield rate
        finally:
            with self.lock:
                self._give("disk_read_bps", dict(self.shares["disk_read_bps"].set(key, None)))
                del self._serving[key]

    def _follow(self, task: TaskDescription, running: RunningTask) -> None:
        """Forward the task's records to the scheduler; report how it ended; remove its cgroup."""
        ident = {"task_id": task["task_id"], "attempt": task["attempt"], "host": self.args.host}
        done = None
        for line in running.proc.stdout:
            record = json.loads(line)
            if record["event"] == "using":
                resource = record["resource"]
                (running.using.add if record["active"] else running.using.discard)(resource)
                if resource in self.shares:
                    self._share_host(running, [resource])
                elif record["active"]:  # not shared here: it goes at its allotment
                    self._tell(running, {"given": {resource: running.allotted[resource]}})
            elif record["event"] == "fetch":
                self.channel.send(cast(FetchMessage, {"op": "fetch", **ident, **record}))
            elif record["event"] == "done":
                done = record
        code = running.proc.wait()
        error = running.proc.error()
        with self.lock:
            self.tasks.pop(running.key, None)
        self._share_host(running)
        throttled: dict[str, float] = {}
        with contextlib.suppress(OSError, KeyError):  # a kernel that keeps no throttling statistics
            throttled["throttled_s"] = running.cgroup.throttled_s()
        running.cgroup.remove()
        if self.stopping.is_set():
            return
        if code == 0 and done is not None:
            finished = {"op": "finished", **ident, **done, **throttled, "time": time.time()}
            self.channel.send(cast(FinishedMessage, finished))
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
    parser.add_argument("--disk-read-mbps", type=float, default=0.0, help="0: the host's disk is not shared")
    parser.add_argument("--disk-write-mbps", type=float, default=0.0, help="0: the host's disk is not shared")
    parser.add_argument("--memory-mb", type=float, required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--cgroup-roots", nargs="+", required=True)
    parser.add_argument("--cgroup-version", type=int, choices=[1, 2], required=True)
    parser.add_argument("--compute-mode", choices=["sleep", "cpu"], default="sleep")
    parser.add_argument("--heartbeat-s", type=float, default=0.5)
    return WorkerAgent(parser.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
