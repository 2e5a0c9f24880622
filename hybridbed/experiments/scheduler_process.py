"""The central scheduler process of an emulated run.

It listens on the run's control socket, waits for every worker to register, releases jobs at their
arrival times, places their input blocks (HDFS-like, or where the policy says), asks the policy what to
start whenever containers free up, forwards map-output locations to running reducers once the policy
releases a job's shuffle, notices lost workers (heartbeat timeout or a closed connection) and writes
results as it goes. Times in the results are seconds since the workload started.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from hybridbed.config.scenario import Scenario
from hybridbed.controller.client import ControllerError, FabricClient
from hybridbed.results.path_accounting import received_column
from hybridbed.results.progress import Progress, write_progress
from hybridbed.results.records import (
    ACTION_FIELDS,
    EMULATED_FLOW_FIELDS,
    JOB_FIELDS,
    TASK_FIELDS,
    USAGE_FIELDS,
    AllocationTimeline,
    CsvLog,
    action_row,
    job_row,
    task_row,
    write_plan,
)
from hybridbed.results.summary import summarize
from hybridbed.scheduler.assembly import container, scheduler_core
from hybridbed.scheduler.core import Launch, ShuffleNotice
from hybridbed.scheduler.model import Job, Resources, StageKind, Task, TaskAction, build_job, partition_name
from hybridbed.scheduler.plan_solver import ProcessSolver
from hybridbed.scheduler.transfers import network_cap_mbps
from hybridbed.workers.cgroups import TaskCgroup
from hybridbed.workers.protocol import (
    Channel,
    LaunchMessage,
    NoticeMessage,
    Share,
    ShutdownMessage,
    StoredBlock,
    StoreMessage,
    TaskControlMessage,
    TaskDescription,
    task_key,
)
from hybridbed.workloads.build import build_workload

log = logging.getLogger("hybridbed.scheduler")
REGISTER_TIMEOUT_S = 60.0
HINT_INTERVAL_S = 1.0
# A host that has not stored a job's blocks by then is lost or stuck, and its reads fail. A testbed bound, not a
# model parameter: the upload puts a job's input in place as it is submitted, before any of its tasks runs, as
# Hadoop's input is in HDFS before its job starts (the writes are unpaced: milliseconds).
STORE_TIMEOUT_S = 60.0


class SchedulerServer:
    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.scenario = Scenario.model_validate_json((out_dir / "scenario.json").read_text())
        layout = json.loads((out_dir / "cluster.json").read_text())
        self.socket_path = layout["socket"]
        self.controller_port = layout.get("controller_port")
        self.hosts = {h["name"]: h for h in layout["hosts"]}
        self.task_cgroups: dict | None = layout.get("task_cgroups")  # where agents put task cgroups, if anywhere
        self.core = scheduler_core(self.scenario, {name: h["rack"] for name, h in self.hosts.items()})
        self.policy, self.cluster = self.core.policy, self.core.cluster
        self.policy.plan_solver = ProcessSolver()  # periodic plans off the heartbeat path
        self.specs = build_workload(self.scenario)
        self.events: queue.Queue[tuple[str, dict | None]] = queue.Queue()
        self.stored: queue.Queue[tuple[str, str]] = queue.Queue()  # (job, host): its input blocks are on the host
        self.channels: dict[str, Channel] = {}
        # host -> when it was last heard from (the monotonic clock: a step of the wall clock loses no worker)
        self.last_seen: dict[str, float] = {}
        self.t0 = 0.0
        self.jobs_log = CsvLog(out_dir / "jobs.csv", JOB_FIELDS)
        self.tasks_log = CsvLog(out_dir / "tasks.csv", TASK_FIELDS)
        self.flows_log = CsvLog(out_dir / "flows.csv", EMULATED_FLOW_FIELDS)
        self.usage_log = CsvLog(out_dir / "usage.csv", USAGE_FIELDS)
        self.actions_log = CsvLog(out_dir / "preemptions.csv", ACTION_FIELDS)
        self.allocation = AllocationTimeline(out_dir / "allocation.csv")
        self.task_stats: dict[tuple[str, int], dict] = {}

    # connections ----------------------------------------------------------------------------------
    def _listen(self) -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        server.bind(self.socket_path)
        server.listen(len(self.hosts) + 4)
        self._server = server
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            conn, _ = self._server.accept()
            threading.Thread(target=self._read, args=(Channel(conn),), daemon=True).start()

    def _read(self, channel: Channel) -> None:
        host = None
        try:
            while (message := channel.receive()) is not None:
                if message["op"] == "register":
                    host = message["host"]
                    self.events.put(("register", {**message, "channel": channel}))
                elif message["op"] == "stored":
                    self.stored.put((message["job"], message["host"]))
                else:
                    self.events.put((message["op"], message))
        except (OSError, ValueError):
            pass
        if host is not None:
            self.events.put(("disconnect", {"host": host}))

    def _now(self) -> float:
        return time.time() - self.t0

    # main loop ------------------------------------------------------------------------------------
    def run(self) -> int:
        self._listen()
        self._await_workers()
        self.policy.plan(self.specs, self.cluster)
        write_plan(self.out_dir, self.policy.plan_rows())
        self.t0 = time.time()
        arrivals = sorted(self.specs, key=lambda s: (s.arrival_s, s.job_id))
        total = len(arrivals)
        next_hint = 0.0
        status = "failed"
        try:
            while len(self.core.finished) < total:
                now = self._now()
                if now > self.scenario.max_duration_s:
                    raise TimeoutError(f"workload not done after max_duration_s={self.scenario.max_duration_s:g}")
                while arrivals and arrivals[0].arrival_s <= now:
                    self._submit(arrivals.pop(0), now)
                self._drain_events()
                self._check_heartbeats()
                self._carry_out(self.core.act(self._now()))
                self._dispatch(self.core.schedule(self._now()), self.core.shuffle_notices())
                if self.allocation.due(self._now()):
                    self.allocation.record(self.cluster.allocation(), self._now())
                if self._now() >= next_hint:
                    self._hint_ocs()
                    next_hint = self._now() + HINT_INTERVAL_S
                self._write_progress(total)
            status = "done"
            return 0
        finally:
            self.policy.plan_solver.close()
            self._write_progress(total, final=True)
            for channel in self.channels.values():
                try:
                    shutdown: ShutdownMessage = {"op": "shutdown"}
                    channel.send(shutdown)
                except OSError:
                    pass
            self.allocation.record(self.cluster.allocation(), self._now(), final=True)
            for log_file in (
                self.jobs_log,
                self.tasks_log,
                self.flows_log,
                self.usage_log,
                self.actions_log,
                self.allocation,
            ):
                log_file.close()
            write_plan(self.out_dir, self.policy.plan_rows())  # again: per-job plans made as jobs arrived
            summarize(self.out_dir, total, status, started_at=self.t0)

    def _await_workers(self) -> None:
        deadline = time.monotonic() + REGISTER_TIMEOUT_S
        while len(self.channels) < len(self.hosts):
            try:
                kind, message = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                missing = sorted(set(self.hosts) - set(self.channels))
                raise RuntimeError(
                    f"workers {', '.join(missing)} did not register within {REGISTER_TIMEOUT_S:g} s"
                ) from None
            if kind == "register":
                self.channels[message["host"]] = message["channel"]
                self.last_seen[message["host"]] = time.monotonic()

    def _drain_events(self) -> None:
        try:
            kind, message = self.events.get(timeout=0.05)
        except queue.Empty:
            return
        while True:
            self._handle(kind, message)
            try:
                kind, message = self.events.get_nowait()
            except queue.Empty:
                return

    def _handle(self, kind: str, message: dict) -> None:
        now = self._now()
        host = message.get("host")
        if host in self.last_seen:
            self.last_seen[host] = time.monotonic()
        if kind == "finished":
            task = self.core.tasks[message["task_id"]]
            if task.attempt == message["attempt"] and task.host == host:
                self._log_task(task, message, now)
            job = self.core.task_finished(message["task_id"], message["attempt"], now)
            if job is not None:
                self._log_job(job)
        elif kind == "failed":
            if self.core.task_failed(message["task_id"], message["attempt"], now):
                log.warning(
                    "task %s attempt %s failed on %s (exit %s): %s",
                    message["task_id"],
                    message["attempt"],
                    host,
                    message["exit_code"],
                    message["error"].strip()[-500:],
                )
        elif kind == "fetch":
            self._log_flow(message)
            if sources := message.get("sources"):  # a shuffle connection: the parent outputs it copied
                self.core.shuffle_fetched(message["task_id"], message["attempt"], sources)
        elif kind == "heartbeat" and self.t0:
            if host in self.cluster.hosts:
                self.cluster.hosts[host].report_usage(
                    Resources(
                        0,
                        0,
                        message["disk_read_mbps"],
                        message["disk_write_mbps"],
                        message["net_in_mbps"],
                        message["net_out_mbps"],
                    ),
                    self._now(),
                    self.scenario.workers.heartbeat_s,
                )
            self.usage_log.write(
                {
                    "time_s": round(message["time"] - self.t0, 3),
                    "host": host,
                    "running_tasks": message["running"],
                    **{field: round(message[field], 1) for field in USAGE_FIELDS[3:]},
                }
            )
        elif kind == "disconnect":
            self._lose(host, "closed its control connection")
        elif kind == "register":
            log.warning("late registration from %s ignored", host)

    def _check_heartbeats(self) -> None:
        timeout = self.scenario.scheduler.heartbeat_timeout_s
        for host, seen in list(self.last_seen.items()):
            if time.monotonic() - seen > timeout:
                self._lose(host, f"sent no heartbeat for {timeout:g} s")

    def _lose(self, host: str, why: str) -> None:
        if host not in self.last_seen:
            return
        del self.last_seen[host]
        self.channels.pop(host, None)
        stranded = [task_key(t.task_id, t.attempt) for t in self.cluster.hosts[host].running.values()]
        requeued = self.core.host_lost(host, self._now())
        log.warning("worker %s lost (%s): %d task(s) requeued", host, why, len(requeued))
        # as YARN's NodeManager loss: the containers go with their node (on a further server, with the run's
        # part there, at the run's end: their cgroups are not reachable from here)
        if self.task_cgroups and stranded and self.hosts[host].get("server", 0) == 0:
            threading.Thread(target=self._end_tasks, args=(stranded,), daemon=True).start()

    def _end_tasks(self, keys: list[str]) -> None:
        """End the processes a lost worker left running (they are in their task cgroups) and remove the cgroups."""
        roots = [Path(p) for p in self.task_cgroups["roots"]]
        for key in keys:
            try:
                TaskCgroup(roots, self.task_cgroups["version"], key).remove()
            except (OSError, RuntimeError) as err:
                log.warning("could not end task %s of a lost worker: %s", key, err)
                continue
            log.info("ended task %s of a lost worker", key)

    # decisions ------------------------------------------------------------------------------------
    def _submit(self, spec, now: float) -> None:
        job = build_job(spec, container(self.scenario))
        self.core.submit(job, now)
        self._upload(job)

    def _upload(self, job: Job) -> None:
        """The job's input goes into the cluster's storage before it runs, as into HDFS: every replica holder
        writes its blocks (on whichever server it is), and the scheduler waits until each says they are
        stored, so no task reads a block before it is there."""
        blocks: dict[str, list[StoredBlock]] = {}
        for task in job.maps:
            block = task.input_block
            for host in block.replicas:
                blocks.setdefault(host, []).append({"path": f"blocks/{block.block_id}", "bytes": block.size_bytes})
        waiting = set()
        for host, stored in blocks.items():
            store: StoreMessage = {"op": "store", "job": job.job_id, "blocks": stored}
            if self._send(host, store):
                waiting.add(host)
        deadline = time.monotonic() + STORE_TIMEOUT_S
        while waiting:
            try:
                stored_job, host = self.stored.get(timeout=max(0.0, deadline - time.monotonic()))
                if stored_job == job.job_id:  # not a late answer about an earlier job
                    waiting.discard(host)
            except queue.Empty:
                log.warning(
                    "job %s: %s did not store its input blocks within %g s",
                    job.job_id,
                    sorted(waiting),
                    STORE_TIMEOUT_S,
                )
                return

    def _dispatch(self, launches: list[Launch], notices: list[ShuffleNotice]) -> None:
        ocs = self.scenario.ocs
        for launch in launches:
            message: LaunchMessage = {"op": "launch", "task": self._task_message(launch.task)}
            self._send(launch.host, message)
        marks_elephants = ocs.steering == "elephant"
        for notice in notices:
            consumer = notice.consumer
            key = task_key(consumer.task_id, consumer.attempt)
            partition = partition_name(consumer)
            for source, size, elephant in zip(notice.sources, notice.sizes, notice.elephants, strict=True):
                notice_message: NoticeMessage = {
                    "op": "notice",
                    "key": key,
                    "notice": {
                        "source": source.task_id,
                        "host": source.host,
                        "ip": self.hosts[source.host]["ip"],
                        "path": f"{_output_dir(source)}/{partition}",
                        "bytes": size,
                        "dscp": ocs.bulk_dscp if elephant and marks_elephants else None,
                    },
                }
                self._send(consumer.host, notice_message)

    def _carry_out(self, actions: list[TaskAction]) -> None:
        """Tell the workers to freeze, thaw, kill or re-quota the tasks the policy preempted or re-shared."""
        for action in actions:
            self.actions_log.write(action_row(action, self._now()))
            message: TaskControlMessage = {"op": action.action, "key": task_key(action.task.task_id, action.attempt)}
            if action.action == "resume":
                message["overhead_s"] = self.scenario.workers.resume_overhead_s
            elif action.action == "share":
                message["share"] = self._rates(action.task, action.allocation)
            self._send(action.host, message)

    def _send(self, host: str, message: StoreMessage | LaunchMessage | NoticeMessage | TaskControlMessage) -> bool:
        """Send to the host's agent; False if it is lost (the core requeues its tasks)."""
        channel = self.channels.get(host)
        if channel is None:
            return False
        try:
            channel.send(message)
            return True
        except OSError:
            self._lose(host, "control connection broke")
            return False

    def _rates(self, task: Task, allocation: Resources) -> Share:
        """A task's cores and the rates its worker paces it at (bits/s; None: not paced)."""
        cap = network_cap_mbps(allocation, task.kind, self.scenario.workers.task_rate_cap_mbps)
        return {
            "cores": allocation.cores,
            "rate_bps": cap * 1e6 if cap else None,
            "disk_read_bps": allocation.disk_read_mbps * 1e6 or None,
            "disk_write_bps": allocation.disk_write_mbps * 1e6 or None,
        }

    def _task_message(self, task: Task) -> TaskDescription:
        demand = task.demand
        message: TaskDescription = {
            "task_id": task.task_id,
            "attempt": task.attempt,
            "kind": task.kind.value,
            "memory_mb": demand.memory_mb,
            "compute_s": task.compute_s,
            "partitions": [[partition_name(c), task.partition_for(c)] for c in self._consumers(task)],
            "output_bytes": task.output_bytes,
            "output_dir": _output_dir(task),
            **self._rates(task, demand),
        }
        if task.allocation != demand:  # a smaller share, or its demand as placed: paced at that
            message["share"] = self._rates(task, task.allocation)
        if task.kind is StageKind.MAP:
            message["input"] = {
                "path": f"blocks/{task.input_block.block_id}",
                "sources": [{"host": h, "ip": self.hosts[h]["ip"]} for h in self.cluster.input_sources(task)],
            }
        else:
            message["n_sources"] = len(self.cluster.jobs[task.job_id].sources_of(task))
            message["seed"] = self.scenario.seed  # its fetchers draw their hosts from it (workers/shuffle.py)
        return message

    def _consumers(self, task: Task) -> list[Task]:
        """The tasks of the child stages, each of which fetches a partition of this task's output."""
        stages = self.cluster.jobs[task.job_id].stages
        return [c for child in stages[task.stage].children for c in stages[child].tasks]

    def _hint_ocs(self) -> None:
        matrix = self.policy.ocs_demand(self.cluster)
        if matrix is None or self.controller_port is None:
            return
        try:
            FabricClient(self.controller_port).set_demand(matrix)
        except (ControllerError, OSError) as err:
            log.warning("OCS demand hint not delivered: %s", err)

    # results --------------------------------------------------------------------------------------
    def _log_task(self, task: Task, message: dict, now: float) -> None:
        self.tasks_log.write(task_row(task, now, self.cluster.rack_of, message))

    def _log_job(self, job: Job) -> None:
        self.jobs_log.write(job_row(job))

    def _log_flow(self, message: dict) -> None:
        src, dst = message["src_host"], message["host"]
        self.flows_log.write(
            {
                "job_id": self.core.tasks[message["task_id"]].job_id,
                "task_id": message["task_id"],
                "attempt": message["attempt"],
                "kind": message["kind"],
                "src_host": src,
                "dst_host": dst,
                "src_rack": self.hosts[src]["rack"],
                "dst_rack": self.hosts[dst]["rack"],
                "bytes": message["bytes"],
                "start_s": round(message["start"] - self.t0, 4),
                "end_s": round(message["end"] - self.t0, 4),
                "elephant": int(message.get("elephant", False)),
                "received": received_column(message["received"], message["start"]),
            }
        )

    def _write_progress(self, total: int, final: bool = False) -> None:
        write_progress(
            self.out_dir,
            Progress(
                len(self.core.finished),
                total,
                round(self._now(), 1),
                sum(len(h.running) for h in self.cluster.hosts.values()),
                sorted(n for n, h in self.cluster.hosts.items() if not h.alive),
                final,
                self.t0,
            ),
        )


def _output_dir(task: Task) -> str:
    return f"out/{task.job_id}/{task_key(task.task_id, task.attempt)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hybridbed central scheduler (started by `hybridbed run`)")
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind, so the summary says the run failed
    # A terminal's Ctrl-C reaches the whole process group; the owner (`hybridbed run`) then stops the scheduler
    # with one SIGTERM, and a second Ctrl-C must not cut the summary short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return SchedulerServer(args.out_dir).run()
    except Exception:
        log.exception("scheduler failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
