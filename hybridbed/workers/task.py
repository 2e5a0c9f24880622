"""One task attempt, run by a worker as its own process inside the task's cgroup.

stdin: the task as one JSON line, then (a task of a stage with parents) one JSON line per parent task
output to fetch; a later line for the same parent task replaces an earlier one (it ran again elsewhere).
A line {"share": {"cores": ..., "rate_bps": ..., "disk_read_bps": ..., "disk_write_bps": ...}} gives the task
a new share while it runs (its cgroup's quota changes with it): compute, disk and the transfers under way
go at the new rates (a connection's new rate is kept by the receiver, below the cap its sender paces at).
A line {"given": {"cores" | "disk_read_bps" | "disk_write_bps": value}} gives what its host gives it of that
resource now (less than its share where a policy over-commits the host, `workers.host_share`).
stdout: JSON lines: `using` when it starts and stops computing, reading its block from disk or writing its
output (`resource`: cores, disk_read_bps, disk_write_bps; `active`: true, false; the agent shares the host
among the tasks using each), a `fetch` record per connection, then `done` with the totals and the CPU time
the process used (`cpu_s`, all its threads: with compute emulated by waiting, its reading, pacing, fetching
and writing alone).

Compute is emulated either by waiting (`sleep`, the default: it leaves the CPU to Open vSwitch on a
small machine) or by burning CPU time inside the cgroup's quota (`cpu`).

A map (a root stage's task) streams: it reads its block, computes and writes its output at the same
time, and is done when all three are; a task with parents (a reducer) fetches every partition, then
computes while writing its output. Output is one file per consumer task (`part-<stage>-<index>`) and,
in a stage without children, the job's output. Disk reads and writes are paced at the task's allocated
rates (`disk_read_bps`, `disk_write_bps`: per-task token buckets, as Tetris enforces disk allocations), or
at what the host's disk gives it where that is less; its network connections together at `rate_bps`.
"""

from __future__ import annotations

import contextlib
import json
import queue
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hybridbed.config.constants import HDFS_READ_TIMEOUT_S, SHUFFLE_READ_TIMEOUT_S
from hybridbed.workers.fetch import Fetch, FetchError, fetch
from hybridbed.workers.pacing import Pacer, Rate, Rates, write_bytes
from hybridbed.workers.shuffle import Connection, ShuffleFetches, fetch_order

_stdout_lock = threading.Lock()  # compute reports from a thread of its own


def emit(record: dict) -> None:
    with _stdout_lock:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


SLEEP_STEP_S = 0.05  # compute by waiting goes in steps this long, so a suspension is not counted as work


class Speed:
    """The share of its demanded cores a task has now (at most 1): waiting compute goes at this pace, as
    CPU-burning compute does under the cgroup's quota."""

    def __init__(self, demanded_cores: float):
        self.demanded = demanded_cores
        self.ratio = 1.0

    def set_cores(self, cores: float) -> None:
        self.ratio = min(1.0, cores / self.demanded) if self.demanded > 0 else 1.0


def compute(seconds: float, mode: str, speed: Speed | None = None) -> None:
    """Emulated compute that stops while the task is suspended (its cgroup frozen): CPU time does by
    itself; waiting counts each step as at most twice its length, so a freeze adds its length, and at the
    task's current share of its cores."""
    if mode == "sleep":
        done = 0.0
        while done < seconds - 1e-9:
            ratio = speed.ratio if speed else 1.0
            step = min(SLEEP_STEP_S, (seconds - done) / ratio)
            start = time.monotonic()
            time.sleep(step)
            done += min(time.monotonic() - start, 2 * step) * ratio
        return
    used = time.process_time()
    while time.process_time() - used < seconds:
        sum(range(10_000))


@contextlib.contextmanager
def using(resource: str) -> Iterator[None]:
    """Tell the agent while the task uses one of its host's shared resources (cores, disk reads, disk writes):
    it shares each among the tasks using it and says what this one gets. The use starts once that answer is
    in (or after GIVEN_WAIT_S without one), so that no burst goes out at more than the host gives."""
    with GIVEN.answered:
        answers = GIVEN.answers[resource]
    emit({"event": "using", "resource": resource, "active": True})
    with GIVEN.answered:
        GIVEN.answered.wait_for(lambda: GIVEN.answers[resource] > answers, timeout=GIVEN_WAIT_S)
    try:
        yield
    finally:
        emit({"event": "using", "resource": resource, "active": False})


class Given:
    """How many times the agent has said what the host gives the task of each resource."""

    def __init__(self) -> None:
        self.answers: Counter[str] = Counter()
        self.answered = threading.Condition()

    def arrived(self, given: dict) -> None:
        with self.answered:
            self.answers.update(given.keys())
            self.answered.notify_all()


GIVEN = Given()
GIVEN_WAIT_S = 2.0  # an agent answers within milliseconds; past this the task goes on at its allotment


def reported_compute(seconds: float, mode: str, speed: Speed) -> None:
    with using("cores"):
        compute(seconds, mode, speed)


def write_outputs(files: dict[Path, int], rate: Rate) -> None:
    with using("disk_write_bps"):
        pacer = Pacer(rate, saved_s=0.0)  # a disk gives no bursts above its rate
        for path, size in files.items():
            write_bytes(path, size, pacer)


def alongside(*jobs: tuple) -> list[threading.Thread]:
    """Start each (function, args) in a thread of its own."""
    threads = [threading.Thread(target=function, args=args) for function, *args in jobs]
    for thread in threads:
        thread.start()
    return threads


def output_files(task: dict, data_dir: Path) -> dict[Path, int]:
    """Where the task writes: a partition per consumer task, and the job's output if it has any."""
    out_dir = data_dir / task["output_dir"]
    files = {out_dir / name: size for name, size in task["partitions"]}
    if task["output_bytes"]:
        files[out_dir / "output"] = task["output_bytes"]
    return files


def compute_and_write(task: dict, files: dict[Path, int], speed: Speed, rates: Rates) -> list[threading.Thread]:
    return alongside(
        (reported_compute, task["compute_s"], task["compute_mode"], speed), (write_outputs, files, rates.disk_write)
    )


def run_map(task: dict, data_dir: Path, speed: Speed, rates: Rates) -> dict:
    files = output_files(task, data_dir)
    threads = compute_and_write(task, files, speed, rates)
    block = task["input"]
    local = data_dir / block["path"]
    if local.exists():
        read_local, read_remote = local.stat().st_size, 0
        with using("disk_read_bps"), local.open("rb") as data:
            pacer = Pacer(rates.disk_read, saved_s=0.0)  # a disk gives no bursts above its rate
            while chunk := data.read(1 << 20):
                pacer.take(len(chunk))
    else:
        result = _fetch_from_any(block["sources"], block["path"], task.get("rate_bps"), rates.connection)
        emit({"event": "fetch", "kind": "input", **result})
        read_local, read_remote = 0, result["bytes"]
    for thread in threads:
        thread.join()
    return {"read_local_bytes": read_local, "read_remote_bytes": read_remote, "written_bytes": sum(files.values())}


def _fetched(got: Fetch) -> dict:
    """A connection's record: its bytes, when it ran and its notes of the bytes received as it went."""
    return {"bytes": got.bytes, "start": got.start, "end": got.end, "received": got.received}


@dataclass
class Broken:
    """A reducer's fetch connection failed after receiving its first `copied` outputs whole; `record` is the
    connection's record of those (None when there are none)."""

    copied: int
    record: dict | None


def _fetch_from_any(sources: list[dict], path: str, rate_bps: float | None, live: Rate) -> dict:
    errors = []
    for source in sources:
        try:
            got = fetch(source["ip"], [path], rate_bps, Pacer(live, saved_s=0.0), timeout_s=HDFS_READ_TIMEOUT_S)
            return {"src_host": source["host"], **_fetched(got)}
        except FetchError as err:
            errors.append(str(err))
    raise FetchError("; ".join(errors))


def run_reduce(task: dict, data_dir: Path, notices: queue.Queue[dict], speed: Speed, rates: Rates) -> dict:
    """Fetch the partition of every parent task as their locations arrive, as Hadoop's shuffle does
    (workers/shuffle.py: one connection per host with outputs, up to PARALLEL_FETCHES at once, each host drawn
    at random among those waiting, all held to the task's rate together), then compute while writing.

    A failed connection's outputs are fetched again from the latest location announced for each, its host
    once its penalty is over (workers/shuffle.py): a congested path can stall a transfer past the read timeout
    while both hosts are fine, and when a host is lost the scheduler re-runs its tasks and announces the new
    location."""
    n_sources = task["n_sources"]
    plan = ShuffleFetches(rng=fetch_order(task["seed"], task["task_id"], task["attempt"]))
    latest: dict[str, dict] = {}
    fetched_bytes = 0
    results: queue.Queue[tuple[Connection, dict | Broken | Exception]] = queue.Queue()
    pacer = Pacer(rates.connection, saved_s=0.0)  # the task's connections share its rate

    def record(connection: Connection, got: Fetch, dscp: int | None) -> dict:
        return {"src_host": connection.host, **_fetched(got), "elephant": dscp is not None}

    def worker(connection: Connection, ip: str, paths: list[str], dscp: int | None) -> None:
        try:
            got = fetch(ip, paths, task.get("rate_bps"), pacer, timeout_s=SHUFFLE_READ_TIMEOUT_S, dscp=dscp)
            results.put((connection, record(connection, got, dscp)))
        except FetchError as err:
            copied = err.copied
            kept = Broken(0, None) if copied is None else Broken(len(copied.paths), record(connection, copied, dscp))
            results.put((connection, kept))
        except Exception as err:  # a bug, not the network: the task fails with it rather than wait for ever
            results.put((connection, err))

    while len(plan.fetched) < n_sources:
        while True:  # take every notice that has arrived
            try:
                notice = notices.get(timeout=0.05 if plan.in_flight or plan.location else 1.0)
            except queue.Empty:
                break
            latest[notice["source"]] = notice
            plan.announce(notice["source"], notice["host"])
        for connection in plan.open():
            notices_now = [latest[source] for source in connection.sources]
            ip, paths = notices_now[0]["ip"], [n["path"] for n in notices_now]
            dscp = next((n["dscp"] for n in notices_now if n.get("dscp")), None)  # one elephant marks it
            threading.Thread(target=worker, args=(connection, ip, paths, dscp), daemon=True).start()
        while not results.empty():
            connection, result = results.get()
            if isinstance(result, Exception):
                raise result
            if isinstance(result, Broken):  # the outputs it copied whole are fetched, the others wait again
                plan.failed(connection, result.copied)
                if result.record is None:
                    continue
                sources, fetched = connection.sources[: result.copied], result.record
            else:
                plan.done(connection)
                sources, fetched = connection.sources, result
            fetched_bytes += fetched["bytes"]
            emit({"event": "fetch", "kind": "shuffle", "sources": list(sources), **fetched})
    files = output_files(task, data_dir)
    for thread in compute_and_write(task, files, speed, rates):
        thread.join()
    return {"fetched_bytes": fetched_bytes, "written_bytes": sum(files.values())}


def main() -> int:
    task = json.loads(sys.stdin.readline())
    data_dir = Path(task["data_dir"])
    speed = Speed(task["cores"])
    rates = Rates(task)
    notices: queue.Queue[dict] = queue.Queue()

    def take_share(share: dict) -> None:
        speed.set_cores(share["cores"])
        rates.update(share)

    if "share" in task:  # it starts with less than its demand
        take_share(task["share"])

    def read_stdin() -> None:
        for line in sys.stdin:
            message = json.loads(line)
            if "share" in message:
                take_share(message["share"])
            elif "given" in message:
                given = message["given"]
                if "cores" in given:
                    speed.set_cores(given["cores"])
                rates.update_given(given)
                GIVEN.arrived(given)
            else:
                notices.put(message)

    threading.Thread(target=read_stdin, daemon=True).start()
    if task["kind"] == "map":
        totals = run_map(task, data_dir, speed, rates)
    else:
        totals = run_reduce(task, data_dir, notices, speed, rates)
    emit({"event": "done", **totals, "cpu_s": time.process_time()})  # forked fresh: this attempt's alone
    return 0


if __name__ == "__main__":
    sys.exit(main())
