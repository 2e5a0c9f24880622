"""The measured flow the fidelity check reads goodput with: its two ends over loopback (the sender starts when
told and stops on time, the receiver notes every byte), the reading of the notes over a common window, and
the most bytes a capture saw within a window."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from hybridbed.testbed import measured_flow
from hybridbed.testbed.probes import largest_burst_bytes, window_goodput

SECONDS = 0.6


def _end(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hybridbed.testbed.measured_flow", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def ready_pair():
    """A listening receiver and a connected sender on loopback, waiting for the start time."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    receiver = _end("receive", str(port))
    assert receiver.stdout is not None and receiver.stdout.readline().strip() == measured_flow.LISTENING
    sender = _end("send", "127.0.0.1", str(port), str(SECONDS))
    assert sender.stdout is not None and sender.stdout.readline().strip() == measured_flow.READY
    yield receiver, sender
    for proc in (receiver, sender):
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _report(proc: subprocess.Popen, start: float | None = None) -> dict:
    """The end's last line of JSON; a sender is first told `start`."""
    out, _ = proc.communicate(None if start is None else f"{start:.6f}\n", timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def test_the_sender_sends_from_the_start_it_is_told_and_the_receiver_notes_every_byte(ready_pair):
    receiver, sender = ready_pair
    start = time.time() + 0.3
    sent = _report(sender, start)
    received = _report(receiver)
    times = [t for t, _ in received["notes"]]
    counts = [b for _, b in received["notes"]]
    assert sent["sent"] == received["bytes"] == counts[-1] > 0
    assert counts == sorted(counts) and times == sorted(times)
    assert len(received["notes"]) >= SECONDS / measured_flow.NOTE_INTERVAL_S / 2
    first_data = next(t for t, b in received["notes"] if b > 0)
    assert start <= first_data, "bytes arrived before the start the sender was told"
    assert times[-1] < start + SECONDS + 0.5, "the sender went on past its seconds"


def test_a_sender_told_a_start_already_past_refuses_to_measure(ready_pair):
    receiver, sender = ready_pair
    report = _report(sender, time.time() - 1.0)
    assert sender.returncode == 1
    assert "told to start" in report["error"]
    assert _report(receiver)["bytes"] == 0


def test_the_window_counts_only_the_bytes_read_inside_it():
    """1 Mb/s read steadily from t=100 s to t=110 s, and a burst of 1 MB read at t=107 s: a window of four
    seconds from t=102 s sees 1 Mb/s in each second and none of the burst."""
    times = np.arange(100.0, 110.01, 0.05)
    counts = (times - 100.0) * 125_000 + np.where(times >= 107.0, 1_000_000, 0)
    notes = np.column_stack([times, counts]).tolist()
    result = window_goodput("a", "b", notes, int(counts[-1]), begin=102.0, seconds=4.0)
    assert result.mbps == pytest.approx(1.0)
    assert result.intervals_mbps == pytest.approx([1.0] * 4)
    assert result.bytes_received == int(counts[-1])
    later = window_goodput("a", "b", notes, int(counts[-1]), begin=106.0, seconds=2.0)
    assert later.mbps == pytest.approx(1.0 + 8.0 / 2)  # the burst's 8 Mb over two seconds


def test_the_largest_burst_is_the_most_bytes_within_any_window():
    """Frames 1.2 ms apart, one clump of ten within a microsecond, given out of order: a 5 ms window holds
    the clump and the spaced frames around it, and no window holds more."""
    spaced = [i * 0.0012 for i in range(100)]
    clump = [0.05 + i * 1e-7 for i in range(10)]
    times = spaced[::-1] + clump
    sizes = [1514] * len(times)
    in_any = max(sum(1 for t in times if start <= t < start + 0.005) for start in times)
    assert largest_burst_bytes(times, sizes, 0.005) == in_any * 1514
    assert in_any >= 14  # the clump and the spaced frames within 5 ms of it
    assert largest_burst_bytes(spaced, [1514] * 100, 0.005) == 5 * 1514
    assert largest_burst_bytes([], [], 0.005) == 0
