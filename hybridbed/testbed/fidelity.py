"""The fidelity self-check: does this machine carry the emulated network as configured?

It measures, on a real emulated fabric, TCP goodput against the configured rate (one flow over the
EPS, one over a circuit, and every host at once), whether steering puts each rack pair on the right
path, the OCS delivery gap against the configured reconfiguration delay, bring-up/tear-down time and
the CPU left over under load.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import psutil

from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.config.servers import ServerSpec
from hybridbed.testbed import probes
from hybridbed.testbed.network import HybridNetwork

RECONFIG_SAMPLES = 5  # reconfigurations measured: one alone varies by a millisecond either way


@dataclass
class FidelityReport:
    racks: int
    hosts_per_rack: int
    racks_per_server: list[int]  # this machine first
    datapath: str
    userspace_tso: bool
    eps_goodput_ratio: float
    ocs_goodput_ratio: float
    all_to_all_eps_goodput_ratio: float
    all_to_all_ocs_goodput_ratio: float
    all_to_all_goodput_ratio: float
    steering_ok: bool
    reconfig_delay_ms: float
    measured_gap_ms: float  # median over RECONFIG_SAMPLES reconfigurations
    dark_time_ratio: float  # median gap / configured delay
    dark_time_ratio_max: float
    bringup_s: float
    teardown_s: float
    cpu_idle_under_load_pct: float

    def as_dict(self) -> dict:
        return asdict(self)


def ring_circuits(fabric: FabricSpec) -> list[dict]:
    """One circuit from every rack to the next: every OCS port sends and receives."""
    return [{"src_rack": r, "dst_rack": (r + 1) % fabric.racks} for r in range(fabric.racks)]


def next_rack_pairs(fabric: FabricSpec) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Every host sends to the same-index host of the next rack: each uplink carries H flows each way."""
    return [((r, h), ((r + 1) % fabric.racks, h)) for r in range(fabric.racks) for h in range(fabric.hosts_per_rack)]


def aggregate_ratio(results: list[probes.GoodputResult], per_flow_mbps: float) -> float:
    return sum(r.mbps for r in results) / (per_flow_mbps * len(results))


def check_steering(net: HybridNetwork, seconds: float = 1.5) -> bool:
    """With circuit 0->1 lit: 0->1 bytes leave ToR 0 on its OCS port; 1->0 and 0->2 bytes on the EPS uplinks,
    and (almost) nothing takes the other path."""
    plan = net.plan
    net.controller.set_circuits([{"src_rack": 0, "dst_rack": 1}])
    ok = True
    for (src, dst), (switch, path_port) in [
        ((0, 1), ("tor0", plan.tor_ocs_port(0))),
        ((1, 0), ("tor1", plan.tor_eps_port)),
        ((0, 2 % plan.racks), ("tor0", plan.tor_eps_port)),
    ]:
        if src == dst:
            continue
        other_port = plan.tor_eps_port if path_port != plan.tor_eps_port else plan.tor_ocs_port(0)
        before = probes.settled_port_bytes(net)
        amount = probes.goodput(net, [((src, 0), (dst, 0))], seconds, omit_s=0)[0].bytes_received
        after = probes.settled_port_bytes(net)
        ok &= probes.bytes_delta(before, after, switch, path_port) >= amount
        ok &= probes.bytes_delta(before, after, switch, other_port) < amount * 0.05
    net.controller.set_circuits([])
    return ok


def run_check(
    fabric: FabricSpec, reconfig_delay_ms: float = 50.0, seconds: float = 4.0, servers: list[ServerSpec] | None = None
) -> FidelityReport:
    ocs = OcsSpec(reconfig_delay_ms=reconfig_delay_ms)
    net = HybridNetwork(fabric, ocs, servers=servers)
    net.start()
    try:
        single = ((0, 0), (1, 0))
        eps = probes.goodput(net, [single], seconds)[0]
        eps_expected = min(fabric.host_rate_mbps, fabric.eps_uplink_mbps)

        pairs = next_rack_pairs(fabric)
        psutil.cpu_percent(interval=None)
        a2a_eps = probes.goodput(net, pairs, seconds)
        idle_eps = 100.0 - psutil.cpu_percent(interval=None)
        a2a_eps_ratio = aggregate_ratio(
            a2a_eps, min(fabric.host_rate_mbps, fabric.eps_uplink_mbps / fabric.hosts_per_rack)
        )

        ocs_ratio = a2a_ocs_ratio = float("nan")
        steering_ok = True
        gaps_s = [float("nan")]
        idle = idle_eps
        if fabric.has_ocs:
            net.controller.set_circuits([{"src_rack": 0, "dst_rack": 1}])
            ocs_flow = probes.goodput(net, [single], seconds)[0]
            ocs_ratio = ocs_flow.mbps / min(fabric.host_rate_mbps, fabric.ocs_rate_mbps)
            net.controller.set_circuits(ring_circuits(fabric))
            psutil.cpu_percent(interval=None)
            a2a_ocs = probes.goodput(net, pairs, seconds)
            idle = min(idle, 100.0 - psutil.cpu_percent(interval=None))
            per_flow = min(fabric.host_rate_mbps, fabric.ocs_rate_mbps / fabric.hosts_per_rack)
            a2a_ocs_ratio = aggregate_ratio(a2a_ocs, per_flow)
            net.controller.set_circuits([])
            steering_ok = check_steering(net)
            gaps_s = [probes.reconfiguration_gap(net)[0] for _ in range(RECONFIG_SAMPLES)]
    finally:
        t0 = time.monotonic()
        net.stop()
        teardown_s = time.monotonic() - t0
    ratios = [r for r in (a2a_eps_ratio, a2a_ocs_ratio) if r == r]
    return FidelityReport(
        racks=fabric.racks,
        hosts_per_rack=fabric.hosts_per_rack,
        racks_per_server=net.racks_per_server(),
        datapath=net.datapath,
        userspace_tso=net.userspace_tso,
        eps_goodput_ratio=eps.mbps / eps_expected,
        ocs_goodput_ratio=ocs_ratio,
        all_to_all_eps_goodput_ratio=a2a_eps_ratio,
        all_to_all_ocs_goodput_ratio=a2a_ocs_ratio,
        all_to_all_goodput_ratio=min(ratios),
        steering_ok=steering_ok,
        reconfig_delay_ms=reconfig_delay_ms,
        measured_gap_ms=statistics.median(gaps_s) * 1000,
        dark_time_ratio=statistics.median(gaps_s) * 1000 / reconfig_delay_ms if reconfig_delay_ms else float("nan"),
        dark_time_ratio_max=max(gaps_s) * 1000 / reconfig_delay_ms if reconfig_delay_ms else float("nan"),
        bringup_s=net.bringup_s,
        teardown_s=teardown_s,
        cpu_idle_under_load_pct=idle,
    )
