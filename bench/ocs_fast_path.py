"""Would a kernel fast path for the OCS stage raise the userspace datapath's rate ceiling?

In the userspace datapath a packet crossing a circuit passes through ovs-vswitchd three times (source ToR, OCS,
destination ToR), all in one thread. This bench lights a ring of circuits through the controller as usual, so the
ToRs steer onto their OCS ports, measures every host sending over the ring at once (and one flow alone), then
hands the OCS stage to the kernel: each OCS port leaves the OCS bridge and gets an ingress tc filter that
redirects whatever arrives to the port its circuit leads to (mirred, the same ring; flower where the kernel has
it, else u32 matching everything: a port's whole light goes to one port, no key is needed). The egress shaping
of the OCS ports stays as it was. It measures again on the same network, and prints goodput over the max-min
share and the CPU left idle, OVS and tc side by side, for each rate and userspace TSO setting.

The tc stage here is static: it only shows what the fast path would gain. Run as root, nothing else running
(about 30 s a setting):
    .venv/bin/python bench/ocs_fast_path.py [--settings 10/20,40/80,100/200,100/200+tso,200/400+tso]
"""

from __future__ import annotations

import argparse
import subprocess
import time
from dataclasses import dataclass

import psutil
from rich.console import Console
from rich.table import Table

from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.testbed import probes
from hybridbed.testbed.fidelity import aggregate_ratio, next_rack_pairs, ring_circuits
from hybridbed.testbed.network import HybridNetwork

SECONDS = 5.0  # each measurement, after the flows' first second (slow start) is left out
SETTLE_S = 0.5


@dataclass(frozen=True)
class Setting:
    host_mbps: float
    ocs_mbps: float
    userspace_tso: bool

    @classmethod
    def parse(cls, text: str) -> Setting:
        """`host/ocs` in Mb/s, `+tso` for userspace TSO: 100/200+tso."""
        rates, _, tso = text.partition("+")
        if tso not in ("", "tso"):
            raise SystemExit(f"setting {text!r}: only '+tso' may follow the rates")
        host, _, ocs = rates.partition("/")
        try:
            return cls(float(host), float(ocs), tso == "tso")
        except ValueError:
            raise SystemExit(f"setting {text!r} is not host/ocs Mb/s, e.g. 100/200 or 100/200+tso") from None


@dataclass(frozen=True)
class Measured:
    all_hosts_ratio: float
    single_ratio: float
    cpu_idle_pct: float


def measure(net: HybridNetwork, fabric: FabricSpec) -> Measured:
    time.sleep(SETTLE_S)
    psutil.cpu_percent(interval=None)
    flows = probes.goodput(net, next_rack_pairs(fabric), SECONDS)
    idle = 100.0 - psutil.cpu_percent(interval=None)
    share = min(fabric.host_rate_mbps, fabric.ocs_rate_mbps / fabric.hosts_per_rack)
    single = probes.goodput(net, [((0, 0), (1, 0))], SECONDS)[0]
    return Measured(aggregate_ratio(flows, share), single.mbps / min(fabric.host_rate_mbps, fabric.ocs_rate_mbps), idle)


def _tc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tc", *args], capture_output=True, text=True)


def hand_ocs_to_tc(net: HybridNetwork, fabric: FabricSpec) -> str:
    """Take every OCS port out of the OCS bridge and cross-connect the ring in tc; returns the classifier used."""
    plan = net.plan
    ports = [plan.port_interface("ocs", plan.ocs_port(r, 0)) for r in range(fabric.racks)]
    for port in ports:
        net.ovs.vsctl("del-port", "ocs", port)
        _tc("qdisc", "add", "dev", port, "ingress").check_returncode()
    classifier = "flower"
    for rack, port in enumerate(ports):
        redirect = ["action", "mirred", "egress", "redirect", "dev", ports[(rack + 1) % fabric.racks]]
        result = _tc("filter", "add", "dev", port, "parent", "ffff:", "protocol", "all", classifier, *redirect)
        if result.returncode != 0 and classifier == "flower":  # cls_flower is not built into every kernel
            classifier = "u32"
        if classifier == "u32":
            match_all = ["u32", "match", "u32", "0", "0"]
            _tc("filter", "add", "dev", port, "parent", "ffff:", "protocol", "all", *match_all, *redirect)
        if "mirred" not in _tc("filter", "show", "dev", port, "parent", "ffff:").stdout:
            raise RuntimeError(f"no redirect on {port}: {result.stderr.strip()}")
    return classifier


def compare(setting: Setting) -> tuple[Measured, Measured, str]:
    """(through OVS, through tc, the classifier) on one 4x2 fabric with the ring lit."""
    fabric = FabricSpec(
        racks=4,
        hosts_per_rack=2,
        host_rate_mbps=setting.host_mbps,
        ocs_rate_mbps=setting.ocs_mbps,
        userspace_tso=setting.userspace_tso,
    )
    with HybridNetwork(fabric, OcsSpec()) as net:
        net.controller.set_circuits(ring_circuits(fabric))
        through_ovs = measure(net, fabric)
        classifier = hand_ocs_to_tc(net, fabric)
        return through_ovs, measure(net, fabric), classifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settings", default="10/20,40/80,100/200,100/200+tso,200/400+tso")
    args = parser.parse_args()
    settings = [Setting.parse(s) for s in args.settings.split(",")]
    table = Table(title="OCS stage in Open vSwitch vs in tc (4x2, all hosts over a ring of circuits)")
    columns = ("host/OCS Mb/s", "TSO", "all hosts: OVS", "tc", "tc / OVS", "one flow: OVS", "tc", "CPU idle: OVS", "tc")
    for column in columns:
        table.add_column(column, justify="right")
    console = Console()
    classifiers = set()
    for setting in settings:
        with console.status(f"{setting.host_mbps:g}/{setting.ocs_mbps:g} Mb/s, TSO {setting.userspace_tso} ..."):
            ovs, tc, classifier = compare(setting)
        classifiers.add(classifier)
        table.add_row(
            f"{setting.host_mbps:g}/{setting.ocs_mbps:g}",
            "on" if setting.userspace_tso else "off",
            f"{ovs.all_hosts_ratio:.3f}",
            f"{tc.all_hosts_ratio:.3f}",
            f"{tc.all_hosts_ratio / ovs.all_hosts_ratio:.2f}",
            f"{ovs.single_ratio:.3f}",
            f"{tc.single_ratio:.3f}",
            f"{ovs.cpu_idle_pct:.0f} %",
            f"{tc.cpu_idle_pct:.0f} %",
        )
    console.print(table)
    console.print(f"tc classifier: {', '.join(sorted(classifiers))} with mirred")


if __name__ == "__main__":
    main()
