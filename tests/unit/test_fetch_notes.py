"""A fetch notes the bytes it has received as it goes, which the circuit accounting reads against the
circuit timeline: over loopback, with the receiving side paced so the fetch takes about a second. A fetch
that fails says which files it had received whole."""

from __future__ import annotations

import socket

import pytest

from hybridbed.config.constants import SHUFFLE_READ_TIMEOUT_S
from hybridbed.workers.fetch import DATA_PORT, RECEIVED_SAMPLE_S, DataServer, FetchError, fetch
from hybridbed.workers.pacing import Pacer, Rate

SIZE = 1_000_000
RATE_BPS = 8 * SIZE  # one second's worth


@pytest.fixture
def server(tmp_path):
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", DATA_PORT)) == 0:
            pytest.skip(f"port {DATA_PORT} is taken on this machine")
    (tmp_path / "out").write_bytes(b"x" * SIZE)
    data_server = DataServer("127.0.0.1", tmp_path)
    data_server.start()
    yield data_server
    data_server.shutdown()
    data_server.server_close()


def test_a_fetch_notes_its_bytes_as_they_arrive(server):
    got = fetch("127.0.0.1", ["out"], None, Pacer(Rate(RATE_BPS), saved_s=0.0), timeout_s=SHUFFLE_READ_TIMEOUT_S)
    times = [t for t, _ in got.received]
    counts = [b for _, b in got.received]
    assert got.received[-1] == (got.end, SIZE)
    assert len(got.received) >= 5, got.received  # a note every RECEIVED_SAMPLE_S of about a second
    assert counts == sorted(counts) and counts[0] < SIZE / 2
    assert all(b - a >= RECEIVED_SAMPLE_S for a, b in zip(times[:-2], times[1:-1]))
    assert got.start <= times[0] and times[-1] <= got.end


def test_a_failed_fetch_keeps_the_files_it_received_whole(server):
    with pytest.raises(FetchError) as failed:  # the server has no "gone": it says so after sending "out"
        fetch("127.0.0.1", ["out", "gone", "out"], None, None, timeout_s=SHUFFLE_READ_TIMEOUT_S)
    copied = failed.value.copied
    assert copied is not None and copied.paths == ["out"] and copied.bytes == SIZE
    assert copied.received[-1] == (copied.end, SIZE)


def test_a_fetch_failing_on_its_first_file_kept_nothing(server):
    with pytest.raises(FetchError) as failed:
        fetch("127.0.0.1", ["gone", "out"], None, None, timeout_s=SHUFFLE_READ_TIMEOUT_S)
    assert failed.value.copied is None
