"""The run watchdog's decisions, on manifests of processes that live or have ended (no network needed: a run
with no namespace or cgroup recorded has only its state directory to lose)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import asdict

import psutil

from hybridbed.testbed import watchdog
from hybridbed.testbed.runs import RunManifest


def manifest_of(tmp_path, pid: int) -> tuple:
    state = tmp_path / "hbtest"
    state.mkdir()
    manifest = RunManifest("hbtest", str(state), 0.0, pid, psutil.Process(pid).create_time())
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


def test_a_run_its_live_owner_tears_down_is_left_to_it(tmp_path, monkeypatch):
    monkeypatch.setattr(watchdog, "REAPED_LOG", tmp_path / "reaped.log")
    state, path = manifest_of(tmp_path, psutil.Process().pid)  # this test's own process: alive
    result: list = []
    watcher = threading.Thread(target=lambda: result.append(watchdog.watch(path, poll_s=0.01)))
    watcher.start()
    watcher.join(timeout=0.3)
    assert watcher.is_alive() and state.exists()  # still watching, nothing removed
    path.unlink()  # the owner's own teardown
    watcher.join(timeout=5)
    assert result == [[]] and not (tmp_path / "reaped.log").exists()
