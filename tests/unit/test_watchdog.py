"""The run watchdog's decisions, on manifests of processes that live or have ended (no network needed: a run
with no namespace or cgroup recorded has only its state directory to lose)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import asdict

import psutil
import psutil._pslinux
import pytest

from hybridbed.testbed import watchdog
from hybridbed.testbed.runs import ProcessRecord, RunManifest, start_ticks


def manifest_of(tmp_path, pid: int) -> tuple:
    state = tmp_path / "hbtest"
    state.mkdir()
    manifest = RunManifest("hbtest", str(state), 0.0, pid, start_ticks(pid))
    path = state / "manifest.json"
    path.write_text(json.dumps(asdict(manifest)))
    return state, path


def test_a_run_whose_owner_has_died_is_removed_and_logged(tmp_path, monkeypatch):
    monkeypatch.setattr(watchdog, "REAPED_LOG", tmp_path / "reaped.log")
    owner = subprocess.Popen([sys.executable, "-c", "pass"])
    state, path = manifest_of(tmp_path, owner.pid)
    owner.wait()
    assert watchdog.watch(path, poll_s=0.01) == [f"removed {state}"]
    assert not state.exists()
    assert f"run hbtest: owner pid {owner.pid} gone" in (tmp_path / "reaped.log").read_text()


def assert_left_to_its_owner(tmp_path, state, path) -> None:
    """The watchdog keeps watching the run and removes nothing, until its owner's own teardown removes the
    manifest."""
    result: list = []
    watcher = threading.Thread(target=lambda: result.append(watchdog.watch(path, poll_s=0.01)))
    watcher.start()
    watcher.join(timeout=0.3)
    assert watcher.is_alive() and state.exists()  # still watching, nothing removed
    path.unlink()  # the owner's own teardown
    watcher.join(timeout=5)
    assert result == [[]] and not (tmp_path / "reaped.log").exists()


def test_a_run_its_live_owner_tears_down_is_left_to_it(tmp_path, monkeypatch):
    monkeypatch.setattr(watchdog, "REAPED_LOG", tmp_path / "reaped.log")
    state, path = manifest_of(tmp_path, psutil.Process().pid)  # this test's own process: alive
    assert_left_to_its_owner(tmp_path, state, path)


def test_a_live_owner_is_still_known_after_the_wall_clock_is_set(tmp_path, monkeypatch):
    """Setting the clock (NTP, a virtual machine resumed) moves the boot time the kernel reports, and with it
    psutil's create_time of every process: the watchdog then removed a live run."""
    monkeypatch.setattr(watchdog, "REAPED_LOG", tmp_path / "reaped.log")
    state, path = manifest_of(tmp_path, psutil.Process().pid)
    before, booted = psutil.Process().create_time(), psutil._pslinux.boot_time()
    monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: booted + 1.0)  # the clock set one second on
    assert psutil.Process().create_time() == pytest.approx(before + 1.0)  # as psutil now tells it
    assert_left_to_its_owner(tmp_path, state, path)


def test_a_record_is_not_taken_for_another_process_on_the_same_pid():
    me = psutil.Process().pid
    assert ProcessRecord(me, start_ticks(me), "owner").is_alive()
    assert not ProcessRecord(me, start_ticks(me) - 1, "owner").is_alive()  # an earlier process with this pid
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = start_ticks(ended.pid)
    ended.wait()
    assert not ProcessRecord(ended.pid, ticks, "worker").is_alive()


def test_a_process_that_ended_unreaped_is_not_alive():
    """A zombie keeps its pid and its start until its parent reaps it, but has ended."""
    ended = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    record = ProcessRecord(ended.pid, start_ticks(ended.pid), "worker")
    assert record.is_alive()  # it runs until its input closes
    ended.stdin.close()
    process, deadline = psutil.Process(ended.pid), time.monotonic() + 10
    while process.status() != psutil.STATUS_ZOMBIE:  # ended, not yet reaped (Popen reaps only when asked)
        assert time.monotonic() < deadline, "the child did not end"
        time.sleep(0.01)
    assert not record.is_alive()
    ended.wait()
