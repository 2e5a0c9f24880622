"""A fabric spread over two servers: the second server is a network namespace of its own with its own sshd,
reached from the first (another namespace) over a veth pair, as a real server is over its NIC. hybridbed runs
in the first namespace; its racks 2 and 3 live on the second, where the run builds its own namespace, cgroup
and private Open vSwitch, and only the ToR-EPS and ToR-OCS links cross, as VXLAN tunnels."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hybridbed.results.fidelity import LINK_INVALID_MEDIAN
from hybridbed.testbed.isolation import NETNS_DIR
from hybridbed.testbed.runs import STATE_ROOT
from hybridbed.testbed.watchdog import REAPED_LOG

from .conftest import check_captures

SSHD = Path("/usr/sbin/sshd")
pytestmark = pytest.mark.skipif(not SSHD.exists(), reason="needs openssh-server (setup.sh installs it)")

SECOND_SERVER_IP = "10.250.0.2"
FIRST_SERVER_IP = "10.250.0.1"


@dataclass
class TwoServers:
    first_netns: str
    servers_file: Path

    def hybridbed(self, *args: str, servers_file: Path | None = None, **popen) -> subprocess.Popen:
        """`hybridbed ARGS --servers FILE`, started on the first server."""
        return self.on_first_server(*args, "--servers", str(servers_file or self.servers_file), **popen)

    def quickstart(self, tmp_path: Path, jobs: int) -> Path:
        """The quickstart scenario with its first `jobs` jobs, its racks 2 and 3 on the second server."""
        scenario = yaml.safe_load((Path(__file__).parents[2] / "scenarios" / "quickstart.yaml").read_text())
        scenario["servers"] = yaml.safe_load(self.servers_file.read_text())
        scenario["workload"]["jobs"] = jobs
        path = tmp_path / f"quickstart-two-servers-{jobs}.yaml"
        path.write_text(yaml.safe_dump(scenario))
        return path

    def on_first_server(self, *args: str, **popen) -> subprocess.Popen:
        """`hybridbed ARGS`, started on the first server."""
        argv = ["nsenter", f"--net={NETNS_DIR / self.first_netns}", sys.executable, "-m", "hybridbed.cli", *args]
        return subprocess.Popen(argv, text=True, **popen)


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory) -> Iterator[TwoServers]:
    tag = secrets.token_hex(2)
    first, second = f"hbt{tag}a", f"hbt{tag}b"
    home = tmp_path_factory.mktemp("servers")
    sshd: subprocess.Popen | None = None
    try:
        for name in (first, second):
            _run("ip", "netns", "add", name)
            _run("ip", "-n", name, "link", "set", "lo", "up")
        _run("ip", "link", "add", f"{first}0", "netns", first, "type", "veth", "peer", "name", f"{second}0", "netns", second)  # fmt: skip
        for name, ip in ((first, FIRST_SERVER_IP), (second, SECOND_SERVER_IP)):
            _run("ip", "-n", name, "addr", "add", f"{ip}/24", "dev", f"{name}0")
            _run("ip", "-n", name, "link", "set", f"{name}0", "up")
        for key in ("host_key", "client_key"):
            _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / key))
        (home / "authorized_keys").write_text((home / "client_key.pub").read_text())
        host_key = (home / "host_key.pub").read_text().split()[:2]
        (home / "known_hosts").write_text(f"{SECOND_SERVER_IP} {' '.join(host_key)}\n")
        (home / "sshd_config").write_text(
            f"ListenAddress {SECOND_SERVER_IP}\nHostKey {home / 'host_key'}\nPidFile {home / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {home / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nUsePAM no\nStrictModes no\nMaxSessions 100\n"
        )
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        # nsenter, not `ip netns exec`: that mounts a fresh /sys, without the cgroup hierarchies
        sshd = subprocess.Popen(
            [
                "nsenter",
                f"--net={NETNS_DIR / second}",
                str(SSHD),
                "-D",
                "-f",
                str(home / "sshd_config"),
                "-E",
                str(home / "sshd.log"),
            ]  # fmt: skip
        )
        deadline = time.monotonic() + 20  # nsenter execs sshd, which stays in the foreground (-D)
        while not (home / "sshd.pid").exists():  # written once it listens
            assert sshd.poll() is None and time.monotonic() < deadline, "sshd did not start: see its log"
            time.sleep(0.05)
        servers = [{"host": SECOND_SERVER_IP, "key_file": str(home / "client_key"), "known_hosts": str(home / "known_hosts")}]  # fmt: skip
        (home / "servers.yaml").write_text(yaml.safe_dump(servers))
        yield TwoServers(first, home / "servers.yaml")
    finally:
        if sshd is not None:
            sshd.terminate()
            sshd.wait()
        for name in (first, second):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def _runs() -> set[str]:
    return {p.name for p in STATE_ROOT.glob("hb*")} if STATE_ROOT.is_dir() else set()


def _namespaces() -> set[str]:
    return {p.name for p in NETNS_DIR.glob("hb*") if not p.name.startswith("hbt")}


def test_check_across_two_servers_keeps_rates_steering_and_the_reconfiguration_delay(two_servers):
    runs_before, namespaces_before = _runs(), _namespaces()
    check = two_servers.hybridbed(
        "check", "--racks", "4", "--hosts", "2", "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = check.communicate(timeout=300)
    assert check.returncode == 0, err[-3000:]
    report = json.loads(out)
    assert report["racks_per_server"] == [2, 2]
    assert report["steering_ok"]
    for single in ("eps_goodput_ratio", "ocs_goodput_ratio"):  # as on one machine (test_fabric.py)
        assert 0.90 <= report[single] <= 1.05, (single, report[single])
    # every flow is read over one window, so no flow can take its peers' share: no more than the links carry
    for aggregate in ("all_to_all_eps_goodput_ratio", "all_to_all_ocs_goodput_ratio"):
        assert LINK_INVALID_MEDIAN <= report[aggregate] <= 1.0, (aggregate, report[aggregate])
    assert report["reconfig_delay_ms"] - 1 <= report["measured_gap_ms"] <= report["reconfig_delay_ms"] + 15
    assert _runs() == runs_before, "a server kept the run's state directory"
    assert _namespaces() == namespaces_before, "a server kept the run's namespace"


def test_racks_live_on_their_server_and_a_killed_first_server_leaves_nothing_behind(two_servers):
    runs_before = _runs()
    net = two_servers.hybridbed(
        "net", "--racks", "4", "--hosts", "1", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        assert net.stdout is not None
        deadline = time.monotonic() + 120
        while "Up." not in (line := net.stdout.readline()):
            assert line and time.monotonic() < deadline, f"no bring-up: {line}"
        (first_run,) = {r for r in _runs() - runs_before if not r.endswith("s1")}
        second_run = f"{first_run}s1"
        assert (STATE_ROOT / second_run).is_dir()
        bridges = {}
        for run in (first_run, second_run):
            env = {**os.environ, "OVS_RUNDIR": str(STATE_ROOT / run / "ovs")}
            listed = subprocess.run(["ovs-vsctl", "list-br"], env=env, capture_output=True, text=True, check=True)
            bridges[run] = set(listed.stdout.split())
        assert bridges[first_run] == {"eps", "ocs", "tor0", "tor1"}
        assert bridges[second_run] == {"tor2", "tor3"}
        net.send_signal(signal.SIGKILL)  # no tear-down: the watchdogs on both servers must remove the run
        net.wait()
        deadline = time.monotonic() + 30
        while {first_run, second_run} & _runs() or {first_run, second_run} & _namespaces():
            assert time.monotonic() < deadline, f"left behind: {_runs() & {first_run, second_run}}"
            time.sleep(0.5)
        # the first server's watchdog asked the second server too (`hybridbed clean` over ssh), and it answered
        reaped = [line for line in REAPED_LOG.read_text().splitlines() if f"run {first_run}:" in line]
        assert reaped and f"server {SECOND_SERVER_IP}, part {second_run}: " in reaped[-1], reaped
        assert "no answer" not in reaped[-1]
    finally:
        if net.poll() is None:
            net.kill()
            net.wait()


def test_a_server_that_refuses_the_run_is_named_and_nothing_is_built(two_servers, tmp_path):
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "unknown_key"))
    servers = yaml.safe_load(two_servers.servers_file.read_text())
    servers[0]["key_file"] = str(tmp_path / "unknown_key")  # not in the server's authorized_keys
    (tmp_path / "servers.yaml").write_text(yaml.safe_dump(servers))
    runs_before, namespaces_before = _runs(), _namespaces()
    check = two_servers.hybridbed(
        "check", "--racks", "4", "--hosts", "1", servers_file=tmp_path / "servers.yaml", stderr=subprocess.PIPE
    )
    _, err = check.communicate(timeout=60)
    assert check.returncode == 1
    assert f"server {SECOND_SERVER_IP}: ssh as root on port 22 failed" in " ".join(err.split())
    assert _runs() == runs_before and _namespaces() == namespaces_before


def test_the_quickstart_comparison_runs_across_two_servers(two_servers, tmp_path):
    """Racks 2 and 3 with their workers on the second server: their agents reach the scheduler through the
    control tunnel's relay, store their input blocks and run their tasks there, and the run's fidelity verdict
    judges the links and the datapaths of both servers."""
    path = two_servers.quickstart(tmp_path, jobs=6)
    runs_before, namespaces_before = _runs(), _namespaces()
    out = tmp_path / "cmp"
    compare = two_servers.on_first_server(
        "compare", str(path), "--policies", "fair,jobpacker", "--out", str(out), "--json",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = compare.communicate(timeout=900)
    assert compare.returncode == 0, stderr[-3000:]
    result = json.loads(stdout)
    for setup, summary in result.items():
        assert summary["status"] == "done" and summary["jobs_done"] == 6, (setup, summary)
        assert summary["fidelity"] in ("ok", "warn"), (setup, summary["fidelity_reasons"])
        tasks = pd.read_csv(out / setup / "tasks.csv")
        assert {"r0h0", "r3h1"} <= set(tasks.host), f"{setup}: tasks ran on {sorted(set(tasks.host))}"
        samples = pd.read_csv(out / setup / "fidelity.csv")
        watched = set(samples.link)
        assert {"tor0-eth1", "tor3-eth1"} <= watched, f"{setup}: fidelity samples of {sorted(watched)}"
        # each server's monitor read the forwarding thread of its own Open vSwitch
        forwarding = samples.groupby("link").forwarding_cpu_share.max()[["tor0-eth1", "tor3-eth1"]]
        assert (forwarding > 0).all(), f"{setup}: forwarding thread's CPU {forwarding.to_dict()}"
    assert _runs() == runs_before and _namespaces() == namespaces_before


def test_a_captured_run_across_two_servers_has_every_hosts_packets_here(two_servers, tmp_path):
    """The second server's hosts stream their captures over their ssh sessions into the run's pcap/ on the
    first: every host that sent or fetched has packets there, and the summary reads every data connection."""
    path = two_servers.quickstart(tmp_path, jobs=4)
    out = tmp_path / "run"
    run = two_servers.on_first_server(
        "run", str(path), "--out", str(out), "--capture-packets", stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr[-3000:]
    hosts = {host["name"] for host in json.loads((out / "cluster.json").read_text())["hosts"]}
    assert {"r0h0", "r3h1"} <= hosts
    remote, _ = check_captures(out)
    assert any(host.startswith(("r2", "r3")) for host in remote.src_host), "no fetch from the second server"
