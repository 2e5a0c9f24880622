"""The control protocol between the central scheduler and the worker agents, shared by both sides: the
typed messages (JSON objects, one per line; `op` names the kind) and the channel that carries them over a
stream socket (a Unix socket under the run directory reaches every Mininet host without touching the
data network; a TCP socket works the same for workers on real machines).

Agent -> scheduler: register, heartbeat, stored, started, fetch, finished, failed.
Scheduler -> agent: store (input blocks to keep, as a DataNode does), launch, notice (where a parent task's
output is), suspend / resume / kill / share (a task's preemption or new share), shutdown. A task attempt is named by its key `<task_id>.a<attempt>`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from typing import Any, Literal, NotRequired, TypedDict

SOCKET_NAME = "scheduler.sock"


def task_key(task_id: str, attempt: int) -> str:
    """How both sides name one attempt of a task."""
    return f"{task_id}.a{attempt}"


# scheduler -> agent ---------------------------------------------------------------------------------
class Share(TypedDict):
    """A task's cores and the rates its worker paces it at (bits/s; None: not paced)."""

    cores: float
    rate_bps: float | None
    disk_read_bps: float | None
    disk_write_bps: float | None


class InputSource(TypedDict):
    host: str
    ip: str


class MapInput(TypedDict):
    path: str  # below the data directory of each source
    sources: list[InputSource]  # replica holders, nearest first


class TaskDescription(TypedDict):
    """What a worker needs to run one task attempt (the task process reads it as its first line)."""

    task_id: str
    attempt: int
    kind: str
    memory_mb: float
    compute_s: float
    partitions: list[list]  # [name, bytes] of each consumer task's partition of this task's output
    output_bytes: int
    output_dir: str
    cores: float
    rate_bps: float | None
    disk_read_bps: float | None
    disk_write_bps: float | None
    share: NotRequired[Share]  # it starts below its demand
    input: NotRequired[MapInput]  # a root stage's task: its input block
    n_sources: NotRequired[int]  # a task with parents: how many parent outputs it fetches
    seed: NotRequired[int]  # a task with parents: the run's seed, from which its fetchers draw their hosts


class StoredBlock(TypedDict):
    path: str  # below the data directory
    bytes: int


class StoreMessage(TypedDict):
    """Input blocks the host keeps replicas of; it answers `stored` once they are on its disk."""

    op: Literal["store"]
    job: str  # whose input they are
    blocks: list[StoredBlock]


class LaunchMessage(TypedDict):
    op: Literal["launch"]
    task: TaskDescription


class SourceNotice(TypedDict):
    source: str  # the parent task
    host: str
    ip: str
    path: str
    bytes: int
    dscp: int | None  # mark the connection that fetches it (an elephant in steering mode `elephant`)


class NoticeMessage(TypedDict):
    op: Literal["notice"]
    key: str
    notice: SourceNotice


class TaskControlMessage(TypedDict):
    op: Literal["suspend", "resume", "kill", "share"]
    key: str
    overhead_s: NotRequired[float]  # resume: the recovery time before the task goes on
    share: NotRequired[Share]  # share: the new one


class ShutdownMessage(TypedDict):
    op: Literal["shutdown"]


# agent -> scheduler ---------------------------------------------------------------------------------
class RegisterMessage(TypedDict):
    op: Literal["register"]
    host: str
    rack: int
    ip: str
    slots: int
    cores: float
    memory_mb: float
    pid: int


class StoredMessage(TypedDict):
    op: Literal["stored"]
    host: str
    job: str


class HeartbeatMessage(TypedDict):
    op: Literal["heartbeat"]
    host: str
    running: int
    cpu_percent: float
    rss_mb: float
    time: float
    io_read_mbps: float
    io_write_mbps: float
    net_in_mbps: float
    net_out_mbps: float
    # the host's disk bandwidth in use now: what it gives the reads and writes under way (0 where the
    # scenario gives hosts no disk bandwidth: they are not paced)
    disk_read_mbps: float
    disk_write_mbps: float


class StartedMessage(TypedDict):
    op: Literal["started"]
    task_id: str
    attempt: int
    pid: int
    cgroups: list[str]
    time: float


class FailedMessage(TypedDict):
    op: Literal["failed"]
    task_id: str
    attempt: int
    host: str
    exit_code: int
    error: str
    time: float


class FetchMessage(TypedDict):
    """One connection a task made (its task process's `fetch` record, with the attempt's identity)."""

    op: Literal["fetch"]
    task_id: str
    attempt: int
    host: str
    event: Literal["fetch"]
    kind: Literal["input", "shuffle"]
    sources: NotRequired[list[str]]  # shuffle: the parent tasks whose outputs the connection copied
    elephant: NotRequired[bool]  # shuffle: the connection was marked for the circuits
    src_host: str
    bytes: int
    start: float
    end: float
    received: list[tuple[float, int]]  # (unix time, bytes so far) as the connection went (workers/fetch.py)


class FinishedMessage(TypedDict):
    """A task attempt ended well (its task process's `done` record with its byte totals)."""

    op: Literal["finished"]
    task_id: str
    attempt: int
    host: str
    event: Literal["done"]
    read_local_bytes: int
    read_remote_bytes: int
    fetched_bytes: int
    written_bytes: int
    cpu_s: float  # CPU time the task's process used
    throttled_s: NotRequired[float]  # held back for its cgroup's CPU quota (where the kernel keeps the count)
    time: float


SchedulerMessage = StoreMessage | LaunchMessage | NoticeMessage | TaskControlMessage | ShutdownMessage
AgentMessage = (
    RegisterMessage | HeartbeatMessage | StoredMessage | StartedMessage | FetchMessage | FinishedMessage | FailedMessage
)


class Channel:
    """One end of a control connection; `send` may be called from any thread."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._reader = sock.makefile("r", encoding="utf-8")
        self._lock = threading.Lock()

    @classmethod
    def connect_unix(cls, path: str) -> Channel:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        return cls(sock)

    def send(self, message: SchedulerMessage | AgentMessage) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with self._lock:
            self.sock.sendall(data)

    def receive(self) -> Any:
        """The next message (a SchedulerMessage or an AgentMessage, as the side says), or None once the other
        end has closed."""
        line = self._reader.readline()
        return json.loads(line) if line else None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
