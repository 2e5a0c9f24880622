"""Every emulated run judges its own fidelity: a normal quickstart run comes out `ok`, the same run with Open
vSwitch's datapath starved of CPU (a CPU quota on its cgroup, as a loaded machine would) does not, nor does it
with links faster than the datapath can forward (its packets then wait inside it, where no link queue shows
them)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hybridbed.results.fidelity import (
    DATAPATH_BEHIND_BYTES,
    DATAPATH_BEHIND_INVALID_SHARE,
    DATAPATH_LOSS_WARN_SHARE,
    FORWARDING_STARVED_INVALID_SHARE,
    FORWARDING_STARVED_WAIT,
)
from hybridbed.results.load import load
from hybridbed.testbed.runs import STATE_ROOT, RunManifest

REPO = Path(__file__).resolve().parents[2]
STARVED_CORES = 0.05  # of one core, for ovs-vswitchd: it forwards every packet of the run
# The quickstart's link rates times this, and its data with them: 300 Mb/s hosts, twice the 150-180 Mb/s the
# userspace datapath forwards on this machine's core (docs/network.md, "Past the packet ceiling")
PAST_THE_CEILING = 30


def run_quickstart(out: Path, starve: bool, scenario: Path = REPO / "scenarios" / "quickstart.yaml") -> dict:
    known = set(STATE_ROOT.glob("*/manifest.json")) if STATE_ROOT.exists() else set()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hybridbed.cli",
            "run",
            str(scenario),
            "--policy",
            "jobpacker",
            "--out",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    starved = None
    try:
        if starve:
            starved = _starve_datapath(proc, known)
        _, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
        if starved is not None:
            starved.rmdir()
    assert proc.returncode == 0, stderr[-2000:]
    return json.loads((out / "summary.json").read_text())


def _starve_datapath(proc: subprocess.Popen, known: set[Path]) -> Path:
    """Move the run's ovs-vswitchd into a CPU cgroup of its own with a quota of STARVED_CORES."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        for manifest_path in set(STATE_ROOT.glob("*/manifest.json")) - known:
            manifest = RunManifest.load(manifest_path)
            vswitchd = [p.pid for p in manifest.processes if p.role == "ovs-vswitchd"]
            if vswitchd and manifest.status == "running":
                cgroup = Path("/sys/fs/cgroup/cpu") / f"hybridbed-test-starved-{manifest.run_id}"
                cgroup.mkdir()
                (cgroup / "cpu.cfs_period_us").write_text("100000")
                (cgroup / "cpu.cfs_quota_us").write_text(str(int(STARVED_CORES * 100000)))
                (cgroup / "cgroup.procs").write_text(str(vswitchd[0]))
                return cgroup
        time.sleep(0.2)
    pytest.fail("the run's ovs-vswitchd never appeared in its manifest")


def test_a_normal_run_is_ok_and_says_what_it_measured(tmp_path):
    summary = run_quickstart(tmp_path / "normal", starve=False)
    fidelity = summary["fidelity"]
    assert fidelity["verdict"] == "ok", fidelity["reasons"]
    assert fidelity["links"]["tor-eps"]["backlogged_intervals"] >= 10  # the EPS uplinks were the bottleneck
    assert 0.95 <= fidelity["links"]["tor-eps"]["ratio_median"] <= 1.05
    assert fidelity["dark_time_ratio"]["count"] > 0 and fidelity["control_lag_ms"]["median"] >= 10.0
    # counted, and a few percent of a core at most (1.7 % on the quickstart, docs/network.md): the bound catches a
    # monitor gone wrong, such as one reading without a pause, not a cost target (its figure varies by the day)
    assert 0 < fidelity["monitor_cpu_share"] < 0.05
    # the hosts' own TCP counters, read in their namespaces: the run's transfers are in them, not this process's
    tcp = fidelity["tcp"]
    assert tcp["segments_sent"] > 1000 and tcp["retransmitted_share"] >= 0
    # every retransmission tried is counted, the fast and slow-start ones once sent: a sum over the same hosts
    # and interval has the first at least the other two (not so if begin and end, or two hosts, were mixed up)
    assert tcp["retransmitted"] >= tcp["fast_retransmits"] + tcp["slow_start_retransmits"] > 0
    # every packet the switch ports received was sent on or dropped at a shaped queue (within tc's miscount)
    datapath = fidelity["datapath"]
    assert datapath["received"] > 10_000 and datapath["lost_share"] <= DATAPATH_LOSS_WARN_SHARE, datapath
    # Open vSwitch's forwarding thread ran, and found a CPU when it had packets
    forwarding = fidelity["forwarding"]
    assert forwarding["cpu_share"]["max"] > 0.05 and forwarding["starved_share"] == 0.0, forwarding
    assert forwarding["wait_share"]["p75"] < FORWARDING_STARVED_WAIT, forwarding
    assert forwarding["behind_share"] == 0.0 and forwarding["backlog_bytes"]["count"] > 0, forwarding
    samples = load(tmp_path / "normal").fidelity  # the time series, as a notebook reads it
    assert set(samples.link_class) == {"host", "tor-eps", "tor-ocs"} and samples.time_s.is_monotonic_increasing


def test_a_run_whose_datapath_is_starved_of_cpu_is_not_ok(tmp_path):
    summary = run_quickstart(tmp_path / "starved", starve=True)
    fidelity = summary["fidelity"]
    assert fidelity["verdict"] == "invalid"
    # the cause, measured where it happens: the forwarding thread waited out the quota (0.05 of a core)
    assert fidelity["forwarding"]["starved_share"] > FORWARDING_STARVED_INVALID_SHARE, fidelity["forwarding"]
    assert fidelity["forwarding"]["cpu_share"]["median"] <= 1.5 * STARVED_CORES, fidelity["forwarding"]
    assert any("forwarding thread waited" in reason for reason in fidelity["reasons"]), fidelity["reasons"]


def test_a_run_whose_links_outpace_the_datapath_is_not_ok(tmp_path):
    spec = yaml.safe_load((REPO / "scenarios" / "quickstart.yaml").read_text())
    spec["fabric"]["host_rate_mbps"] *= PAST_THE_CEILING
    spec["fabric"]["ocs_rate_mbps"] *= PAST_THE_CEILING
    spec["scale"] *= PAST_THE_CEILING  # the same run in time, were every packet forwarded at once
    scenario = tmp_path / "past-the-ceiling.yaml"
    scenario.write_text(yaml.safe_dump(spec))
    fidelity = run_quickstart(tmp_path / "fast", starve=False, scenario=scenario)["fidelity"]
    assert fidelity["verdict"] == "invalid", fidelity["reasons"]
    # the cause, measured where it happens: packets stood in the datapath's sockets, not in the links' queues
    forwarding = fidelity["forwarding"]
    assert forwarding["behind_share"] > DATAPATH_BEHIND_INVALID_SHARE, forwarding
    assert forwarding["backlog_bytes"]["p95"] >= DATAPATH_BEHIND_BYTES, forwarding
    assert any("waited inside the datapath" in reason for reason in fidelity["reasons"]), fidelity["reasons"]
