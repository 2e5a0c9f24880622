"""Pacing a task's I/O at its share: rates the scheduler may change while the task runs, token buckets
that hold disk reads, disk writes and the receiving side of connections to them, and the paced writer
of filler bytes that tasks (and the scheduler process, for input blocks) write data with."""

from __future__ import annotations

import threading
import time
from pathlib import Path

FILL = bytes(range(256)) * 4096  # 1 MiB written over and over


class Rate:
    """A rate in bits/s that the scheduler may change while the task runs (None: not paced)."""

    def __init__(self, bps: float | None):
        self.bps = bps or None


class Pacer:
    """A token bucket holding `saved_s` seconds of its rate (read at every take, so a new share applies at
    once): `take(n)` returns once n more bytes keep the task within it. An idle (or suspended) task saves up
    no more than that. Threads may share one (a reducer's fetch connections share its rate): each take
    books its bytes at once and waits until they are paid for, after the takes booked before it."""

    def __init__(self, rate: Rate, saved_s: float = 1.0):
        self.rate = rate
        self.saved_s = saved_s
        self.tokens = (rate.bps or 0.0) / 8 * saved_s
        self.last = time.monotonic()
        self._lock = threading.Lock()

    def take(self, size: int) -> None:
        if self.rate.bps is None:
            return
        per_s = self.rate.bps / 8  # bytes per second
        with self._lock:
            now = time.monotonic()
            tokens = min(per_s * self.saved_s, self.tokens + (now - self.last) * per_s) - size
            wait = max(0.0, -tokens / per_s)
            # the bucket is empty when this take's wait is over (`last` may lie ahead: a later take waits
            # for it too, at whatever rate holds then)
            self.tokens, self.last = max(tokens, 0.0), now + wait
        if wait > 0:
            time.sleep(wait)


class Rates:
    """The task's share as its worker paces it: disk reads and writes, and the receiving side of its
    connections, all together (their senders pace each one too, at the cap they were asked for, but a
    transfer of a few tens of kilobytes leaves in the first round trips whatever the sending rate: at the
    receiving side a fetch ends when its bytes at its rate say, however small)."""

    def __init__(self, task: dict):
        self.disk_read = Rate(task.get("disk_read_bps"))
        self.disk_write = Rate(task.get("disk_write_bps"))
        self.connection = Rate(task.get("rate_bps"))

    def update(self, share: dict) -> None:
        self.disk_read.bps = share.get("disk_read_bps") or None
        self.disk_write.bps = share.get("disk_write_bps") or None
        self.connection.bps = share.get("rate_bps") or None

    def update_given(self, given: dict) -> None:
        """What the host's disk gives the task now (`workers.host_share`), for the directions named."""
        if "disk_read_bps" in given:
            self.disk_read.bps = given["disk_read_bps"] or None
        if "disk_write_bps" in given:
            self.disk_write.bps = given["disk_write_bps"] or None


def write_bytes(path: Path, size: int, pacer: Pacer | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        while size > 0:
            chunk = min(size, len(FILL))
            if pacer is not None:
                pacer.take(chunk)
            out.write(FILL[:chunk])
            size -= chunk
