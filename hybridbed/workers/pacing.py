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


# A waiting take looks at its rate again at least this often, so a new share applies to the bytes it still owes
# within this much: a 1 MiB write booked at a floor share of 20 KB/s would otherwise sleep its 52 s through.
RATE_LOOK_S = 0.05


class Pacer:
    """A token bucket holding `saved_s` seconds of its rate: `take(n)` returns once n more bytes keep the task
    within it. The rate is read as the bucket fills, so a new share applies at once, to the bytes a waiting take
    still owes too (within RATE_LOOK_S). An idle (or suspended) task saves up no more than `saved_s` of its
    rate. Threads may share one (a reducer's fetch connections share its rate): each take books its bytes at
    once and waits until they are paid for, after the takes booked before it."""

    def __init__(self, rate: Rate, saved_s: float = 1.0):
        self.rate = rate
        self.saved_s = saved_s
        # bytes booked by takes and bytes paid for by the rate so far; paid - booked is the bucket's tokens
        self.booked = 0.0
        self.paid = (rate.bps or 0.0) / 8 * saved_s
        self.last = time.monotonic()
        self._per_s = self._bytes_per_s()  # the rate the bucket fills at until it looks again
        self._lock = threading.Lock()

    def take(self, size: int) -> None:
        with self._lock:
            if self.rate.bps is None:
                return
            self._fill(time.monotonic())
            self.booked += size
            due = self.booked  # this take is paid for when `paid` reaches it
        while True:
            with self._lock:
                self._fill(time.monotonic())
                owed, per_s = due - self.paid, self._per_s
                if per_s is None or owed < 1:  # within a byte: the clock's rounding, not a debt
                    return
                wait = owed / per_s
            time.sleep(min(wait, RATE_LOOK_S))

    def _fill(self, now: float) -> None:
        """Pay for the time since the bucket last looked at the rate it had then, saving up at most `saved_s` of
        it (not paced: no debt); from now on, at the rate now."""
        per_s = self._per_s
        if per_s is None:
            self.paid = self.booked
        else:
            self.paid = min(self.paid + (now - self.last) * per_s, self.booked + per_s * self.saved_s)
        self.last, self._per_s = now, self._bytes_per_s()

    def _bytes_per_s(self) -> float | None:
        return None if self.rate.bps is None else self.rate.bps / 8


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
