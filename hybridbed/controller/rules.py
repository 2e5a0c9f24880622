"""The flow entries of a hybrid DCN, computed from its address plan, the OCS settings and the lit circuits,
apart from the os-ken app that sends them (as Faucet keeps valve logic apart from OpenFlow plumbing), so
what the switches hold is unit-tested without a switch.

ToRs deliver to their hosts and send other racks' traffic up the EPS; the EPS core routes by rack subnet;
the OCS forwards only along lit circuits (in_port -> out_port). A circuit a->b adds a higher-priority
steering entry on ToR a that sends rack b's traffic (all of it, or only DSCP-marked bulk traffic) out of
the circuit's OCS port instead. When only marked traffic may ride circuits, marked traffic without a circuit
has entries of its own to the EPS, so that flow stats count it apart (the measured demand).
"""

from __future__ import annotations

from dataclasses import dataclass

from hybridbed.config.addressing import EPS_DPID, OCS_DPID, FabricPlan
from hybridbed.config.fabric import OcsSpec
from hybridbed.controller.circuits import Circuit, Configuration, steering

PRIO_HOST = 300  # ToR: deliver to a host of this rack
PRIO_CIRCUIT = 200  # ToR: another rack over a lit circuit
PRIO_MARKED_EPS = 150  # ToR, steering only marked traffic: marked traffic over the EPS (counted apart)
PRIO_EPS = 100  # ToR and EPS core: another rack over the packet-switched core; OCS: a lit circuit
COOKIE_EPS = 0x1_0000  # | destination rack: lets flow stats split ToR traffic by destination rack
COOKIE_CIRCUIT = 0x2_0000
COOKIE_MARKED_EPS = 0x4_0000
COOKIE_RACK_MASK = 0xFFFF
ETH_IPV4 = 0x0800


@dataclass(frozen=True)
class FlowEntry:
    """One OpenFlow 1.3 entry: on switch `dpid`, packets matching `match` (os-ken OFPMatch field names) go
    out of `out_port`. Deleting an entry matches it strictly by priority and match."""

    dpid: int
    priority: int
    match: tuple[tuple[str, object], ...]
    out_port: int
    cookie: int = 0

    def match_fields(self) -> dict[str, object]:
        return dict(self.match)


def _rack_match(plan: FabricPlan, rack: int, bulk_dscp: int | None = None) -> tuple[tuple[str, object], ...]:
    fields: tuple[tuple[str, object], ...] = (("eth_type", ETH_IPV4), ("ipv4_dst", plan.rack_subnet(rack)))
    return fields + ((("ip_dscp", bulk_dscp),) if bulk_dscp is not None else ())


def steering_entry(plan: FabricPlan, ocs: OcsSpec, src_rack: int, dst_rack: int, ocs_port: int) -> FlowEntry:
    """On ToR src_rack: traffic for dst_rack (only bulk-marked traffic in steering modes `elephant` and
    `marked`) out of OCS port `ocs_port`."""
    bulk = ocs.bulk_dscp if ocs.steers_marked_only else None
    return FlowEntry(
        plan.tor_dpid(src_rack),
        PRIO_CIRCUIT,
        _rack_match(plan, dst_rack, bulk),
        plan.tor_ocs_port(ocs_port),
        COOKIE_CIRCUIT | dst_rack,
    )


def circuit_entry(plan: FabricPlan, circuit: Circuit) -> FlowEntry:
    """On the OCS: the circuit's input port forwards to its output port."""
    return FlowEntry(
        OCS_DPID,
        PRIO_EPS,
        (("in_port", plan.ocs_port(circuit.src_rack, circuit.src_port)),),
        plan.ocs_port(circuit.dst_rack, circuit.dst_port),
    )


def tor_entries(plan: FabricPlan, ocs: OcsSpec, rack: int, circuits: Configuration) -> list[FlowEntry]:
    """A ToR's entries: its hosts, every other rack over the EPS, and steering onto its lit circuits."""
    dpid = plan.tor_dpid(rack)
    entries = [
        FlowEntry(dpid, PRIO_HOST, (("eth_type", ETH_IPV4), ("ipv4_dst", host.ip)), host.tor_port)
        for host in (plan.host(rack, h) for h in range(plan.hosts_per_rack))
    ]
    entries += [
        FlowEntry(dpid, PRIO_EPS, _rack_match(plan, other), plan.tor_eps_port, COOKIE_EPS | other)
        for other in range(plan.racks)
        if other != rack
    ]
    if ocs.steers_marked_only:  # marked traffic no circuit carries, counted apart for the measured demand
        entries += [
            FlowEntry(
                dpid,
                PRIO_MARKED_EPS,
                _rack_match(plan, other, ocs.bulk_dscp),
                plan.tor_eps_port,
                COOKIE_MARKED_EPS | other,
            )
            for other in range(plan.racks)
            if other != rack
        ]
    entries += [
        steering_entry(plan, ocs, src, dst, port) for (src, dst), port in steering(circuits).items() if src == rack
    ]
    return entries


def demand_cookies(ocs: OcsSpec) -> int:
    """The cookie bits of the ToR entries whose bytes are measured demand: those of marked traffic when only
    marked traffic may ride a circuit, else all traffic to other racks."""
    return (COOKIE_MARKED_EPS if ocs.steers_marked_only else COOKIE_EPS) | COOKIE_CIRCUIT


def eps_entries(plan: FabricPlan) -> list[FlowEntry]:
    """The EPS core routes each rack's subnet to that rack's ToR."""
    return [FlowEntry(EPS_DPID, PRIO_EPS, _rack_match(plan, rack), plan.eps_port(rack)) for rack in range(plan.racks)]


def switch_entries(plan: FabricPlan, ocs: OcsSpec, dpid: int, circuits: Configuration) -> list[FlowEntry]:
    """Everything a switch holds when the circuits `circuits` are lit (installed when it connects)."""
    rack = plan.rack_of_tor_dpid(dpid)
    if rack is not None:
        return tor_entries(plan, ocs, rack, circuits)
    if dpid == EPS_DPID:
        return eps_entries(plan)
    if dpid == OCS_DPID:
        return [circuit_entry(plan, c) for c in sorted(circuits)]
    raise ValueError(f"datapath {dpid:#x} is not a switch of this fabric")
