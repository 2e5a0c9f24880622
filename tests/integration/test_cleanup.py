"""Tear-down and `hybridbed clean` remove exactly what a run created, and nothing else."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from hybridbed.config.fabric import FabricSpec
from hybridbed.testbed.isolation import FabricNamespace
from hybridbed.testbed.network import HybridNetwork
from hybridbed.testbed.runs import STATE_ROOT, RunManifest
from hybridbed.testbed.watchdog import REAPED_LOG

from .conftest import run_cli


def _assert_gone(manifest: RunManifest) -> None:
    assert not Path(manifest.state_dir).exists()
    assert not FabricNamespace(manifest.netns).exists()
    for path in manifest.cgroups:
        assert not Path(path).exists()
    for proc in manifest.processes:
        assert not proc.is_alive(), f"{proc.role} (pid {proc.pid}) survived"


def _foreign_namespace(name: str):
    """Something that is not the run's: a namespace with a veth pair and a bridge device of its own."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(
        ["ip", "netns", "exec", name, "ip", "link", "add", "tor0-eth1", "type", "veth", "peer", "name", "eps-eth1"],
        check=True,
    )
    subprocess.run(["ip", "netns", "exec", name, "ip", "link", "add", "ovs-netdev", "type", "bridge"], check=True)


def _foreign_links(name: str) -> set[str]:
    out = subprocess.run(
        ["ip", "netns", "exec", name, "ip", "-j", "link"], capture_output=True, text=True, check=True
    ).stdout
    return {link["ifname"] for link in json.loads(out)}


def test_teardown_leaves_nothing_and_spares_others():
    _foreign_namespace("hbtest-foreign")
    try:
        net = HybridNetwork(FabricSpec(racks=2, hosts_per_rack=1))
        net.start()
        manifest = RunManifest.load(net.record.manifest_path)
        assert len(manifest.processes) >= 3  # ovsdb-server, ovs-vswitchd, controller
        host_shells = [h.shell.pid for h in net.net.hosts]
        net.stop()
        _assert_gone(manifest)
        assert not any(psutil.pid_exists(pid) for pid in host_shells)
        assert {"tor0-eth1", "eps-eth1", "ovs-netdev"} <= _foreign_links("hbtest-foreign")
    finally:
        subprocess.run(["ip", "netns", "delete", "hbtest-foreign"], check=False)


def _watchdog_of(manifest: RunManifest) -> psutil.Process:
    path = str(Path(manifest.state_dir) / "manifest.json")
    (watchdog,) = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] and path in p.info["cmdline"]]
    return watchdog


@contextlib.contextmanager
def _owned_net_run(foreign: str) -> Iterator[tuple[subprocess.Popen, RunManifest, psutil.Process]]:
    """`hybridbed net` on a small fabric beside a namespace that is not the run's: yields the command's process,
    its run's manifest and the run's watchdog; checks afterwards that the foreign namespace was spared."""
    _foreign_namespace(foreign)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hybridbed.cli", "net", "--racks", "2", "--hosts", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        manifest = _run_of(proc)
        yield proc, manifest, _watchdog_of(manifest)
        assert {"tor0-eth1", "eps-eth1", "ovs-netdev"} <= _foreign_links(foreign)
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["ip", "netns", "delete", foreign], check=False)


def test_a_run_whose_owner_is_killed_is_removed_by_its_watchdog():
    with _owned_net_run("hbtest-foreign3") as (proc, manifest, watchdog):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        watchdog.wait(timeout=30)
        _assert_gone(manifest)
        assert f"run {manifest.run_id}: owner pid {proc.pid} gone" in REAPED_LOG.read_text()


def test_killed_run_is_removed_by_hybridbed_clean_when_its_watchdog_is_gone_too():
    with _owned_net_run("hbtest-foreign2") as (proc, manifest, watchdog):
        watchdog.kill()  # it stays a zombie until `hybridbed net`, its parent, reaps it: it has ended all the same
        deadline = time.monotonic() + 10
        while watchdog.is_running() and watchdog.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the watchdog did not end"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert any(p.is_alive() for p in manifest.processes), "with no watchdog, the daemons outlive their owner"
        result = run_cli("clean", manifest.run_id)
        assert result.returncode == 0, result.stderr
        _assert_gone(manifest)


def _run_of(proc: subprocess.Popen, timeout_s: float = 60) -> RunManifest:
    """The manifest of the run `proc` owns, once its network is up."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert time.monotonic() < deadline, "the run did not come up"
        assert proc.poll() is None, "hybridbed exited"
        mine = [m for m in STATE_ROOT.glob("*/manifest.json") if RunManifest.load(m).owner_pid == proc.pid]
        if mine and (manifest := RunManifest.load(mine[0])).status == "running":
            return manifest
        time.sleep(0.2)


def test_ctrl_c_pressed_three_times_during_a_run_leaves_nothing_and_keeps_the_results(
    tmp_path, small_scenario, scenario_file
):
    path = scenario_file(small_scenario(compute_s=5.0, jobs=2))
    out = tmp_path / "out"
    # a terminal's Ctrl-C goes to the whole foreground process group: hybridbed and everything it started
    proc = subprocess.Popen(
        [sys.executable, "-m", "hybridbed.cli", "run", str(path), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # as in a terminal's foreground job, whatever the test runner inherited (a shell's background job
        # ignores SIGINT, and so would its children)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        manifest = _run_of(proc)
        deadline = time.monotonic() + 60
        while not (out / "workers").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the workers did not start"
            time.sleep(0.2)
        time.sleep(2.0)  # tasks running
        manifest = RunManifest.load(Path(manifest.state_dir) / "manifest.json")
        for pause in (0.15, 0.3, 0.0):
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(pause)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode != 0, stderr
        _assert_gone(manifest)
        assert "still tearing down" in stderr
        assert json.loads((out / "summary.json").read_text())["status"] == "interrupted"
        assert (out / "ocs_events.csv").exists() and (out / "tasks.csv").exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
