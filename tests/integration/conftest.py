"""Fixtures that bring up real emulated fabrics (Mininet, private Open vSwitch, os-ken). Root only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dpkt
import pandas as pd
import pytest
import yaml

from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.config.scenario import Scenario
from hybridbed.testbed import probes
from hybridbed.testbed.capture import PCAP_HEADER_BYTES
from hybridbed.testbed.network import HybridNetwork

pytestmark = pytest.mark.integration

RECONFIG_DELAY_MS = 50.0


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`hybridbed ARGS` in a process of its own, as a user runs it, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "hybridbed.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def assert_goodput_is(net: HybridNetwork, configured: float, floor: float = 0.90) -> None:
    """A 4 s TCP sample from rack 0's first host to rack 1's is within [`floor`, 1.05] of `configured` Mb/s. A
    sample that falls short is taken once more: the shaper bounds every sample from above, while this 2-core VM's
    other work can only lower one, so a short sample may be the machine, two are the path."""
    samples = []
    for _ in range(2):
        mbps = probes.goodput(net, [((0, 0), (1, 0))], seconds=4)[0].mbps
        assert mbps <= 1.05 * configured, f"{mbps:.2f} Mb/s on a {configured} Mb/s path"
        samples.append(round(mbps, 2))
        if mbps >= floor * configured:
            return
    raise AssertionError(f"{samples} Mb/s on a {configured} Mb/s path")


def check_captures(out: Path) -> tuple[pd.DataFrame, dict]:
    """A captured run's pcap/: packets from every host that sent or fetched across hosts and from no other, and
    a summary that counts every such connection. Returns those flows and the summary's timer stalls."""
    flows = pd.read_csv(out / "flows.csv")
    remote = flows[flows.src_host != flows.dst_host]  # a fetch from another host: one TCP connection each
    assert len(remote) > 0
    talked = set(remote.src_host) | set(remote.dst_host)
    for host in json.loads((out / "cluster.json").read_text())["hosts"]:
        pcap = out / "pcap" / f"{host['name']}.pcap"
        assert pcap.stat().st_size >= PCAP_HEADER_BYTES
        with pcap.open("rb") as f:
            captured = sum(1 for _ in dpkt.pcap.Reader(f))
        assert (captured > 0) == (host["name"] in talked), (host["name"], captured)
    stalls = json.loads((out / "summary.json").read_text())["fidelity"]["tcp_timer_stalls"]
    assert stalls["connections"] == len(remote)
    return remote, stalls


def pytest_collection_modifyitems(items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="integration tests need root")
        for item in items:
            if "integration" in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture(scope="module")
def fabric() -> FabricSpec:
    return FabricSpec(racks=4, hosts_per_rack=2)


@pytest.fixture(scope="module")
def hybrid(fabric):
    """A pinned-mode hybrid fabric with a 50 ms reconfiguration delay, shared by a module's tests."""
    with HybridNetwork(fabric, OcsSpec(reconfig_delay_ms=RECONFIG_DELAY_MS)) as net:
        yield net


@pytest.fixture
def clean_circuits(hybrid):
    hybrid.controller.set_circuits([])
    yield hybrid
    hybrid.controller.set_circuits([])


MB = 1_000_000


@pytest.fixture
def small_scenario(tmp_path):
    """A factory of small scenarios: 2 racks x 2 hosts; each job has 4 maps (1 MB blocks) and 2 reduces
    (1 MB of shuffle each), with `compute_s` of compute per task."""

    def make(compute_s: float = 0.5, jobs: int = 1, **workers) -> Scenario:
        trace = tmp_path / "jobs.tsv"
        trace.write_text("".join(f"job{i}\t0\t0\t{4 * MB}\t{2 * MB}\t{MB // 2}\n" for i in range(jobs)))
        return Scenario.model_validate(
            {
                "name": "it",
                "seed": 3,
                "scale": 1.0,
                "fabric": {"racks": 2, "hosts_per_rack": 2},
                "workers": {"slots_per_host": 2, "cores_per_host": 2, "memory_mb_per_host": 1024, **workers},
                "workload": {
                    "source": "swim",
                    "trace": str(trace),
                    "jobs": jobs,
                    "shape": {
                        "block_mb": 1,
                        "reduce_input_mb": 1,
                        "map_rate_mb_s": 1e6,
                        "reduce_rate_mb_s": 1e6,
                        "task_overhead_s": compute_s,
                    },
                },
                "scheduler": {"policy": "fair", "slowstart": 1.0, "heartbeat_timeout_s": 2.0},
                "max_duration_s": 120,
            }
        )

    return make


@pytest.fixture
def scenario_file(tmp_path):
    """Writes a scenario as the YAML file the CLI reads, returning its path."""

    def write(scenario: Scenario) -> Path:
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(scenario.model_dump(mode="json")))
        return path

    return write
