"""Rate-limited links: Mininet's TCLink with an explicit HTB quantum and a bounded queue.

At these rates HTB's default r2q yields quanta above 200 kB and tc warns on every link. Each shaped
interface has exactly one class, so the quantum does not affect sharing; one MTU-sized frame is set.

HTB's leaf queue otherwise defaults to the veth's txqueuelen (1000 packets): 1.2 s at 10 Mb/s, longer
than TCP's minimum retransmission timeout, so competing flows time out and the link runs underused.
Each link instead queues `config.fabric.queue_packets` frames (10 ms at its rate, at least 32), about what a
datacenter switch port buffers.

Open vSwitch's userspace datapath sends every packet, on every port, through one packet socket, and a frame
waiting in a port's queue counts against that socket's send buffer until the link carries it. With the
kernel's default buffer (net.core.wmem_default, 208 KiB: about 100 queued frames) the fabric's queues
together could hold a fraction of what they are configured for, and the datapath dropped every packet past
that, on whatever port, behind the shaped queues' backs: 2.6-4.7 % of the packets the switches received under
an all-to-all load of the 4x2 test fabric (24 queues of 32 packets), none once the buffer holds every queue.
`datapath_send_buffer_bytes` sizes the buffer so that every shaped switch queue can be full at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mininet.link import TCIntf, TCLink

from hybridbed.config.addressing import FabricPlan
from hybridbed.config.fabric import FRAME_BYTES, FabricSpec, queue_packets

BURST_MS = 1.0
MIN_BURST_BYTES = 2 * FRAME_BYTES


# Kernel memory a queued frame holds against its sender's buffer, with room to spare: the skb's data (a
# full-size frame rounds up to a 2 KiB slab) plus the sk_buff and its shared info; measured, 412,800 bytes
# held for 210 queued packets (about 2 KB each). With userspace TSO a frame is a TCP segment of up to 64 KiB.
FRAME_TRUESIZE_BYTES = 4096
TSO_SEGMENT_TRUESIZE_BYTES = 65536 + 4096


@dataclass(frozen=True)
class ShapedPort:
    interface: str  # Mininet's name for switch port p: `<switch>-eth<p>`
    link_class: str  # "host", "tor-eps" or "tor-ocs"
    configured_mbps: float


def shaped_ports(fabric: FabricSpec) -> list[ShapedPort]:
    """Every shaped switch port of the fabric, with the class of its link and the rate it is shaped to.
    Switch ports are the one end of every link the run's namespace holds: a ToR's port to a host carries the
    host link's downward direction, a ToR's EPS and OCS ports the uplinks, the EPS and OCS ports the downlinks."""
    plan = FabricPlan(fabric)
    ports = []
    for rack in range(plan.racks):
        tor = plan.tor_name(rack)
        ports += [
            ShapedPort(plan.port_interface(tor, plan.host(rack, h).tor_port), "host", fabric.host_rate_mbps)
            for h in range(plan.hosts_per_rack)
        ]
        ports.append(ShapedPort(plan.port_interface(tor, plan.tor_eps_port), "tor-eps", fabric.eps_uplink_mbps))
        ports.append(ShapedPort(plan.port_interface("eps", plan.eps_port(rack)), "tor-eps", fabric.eps_uplink_mbps))
        for k in range(plan.ocs_ports_per_tor):
            ports.append(ShapedPort(plan.port_interface(tor, plan.tor_ocs_port(k)), "tor-ocs", fabric.ocs_rate_mbps))
            ports.append(
                ShapedPort(plan.port_interface("ocs", plan.ocs_port(rack, k)), "tor-ocs", fabric.ocs_rate_mbps)
            )
    return ports


def burst_bytes(rate_mbps: float) -> int:
    return max(MIN_BURST_BYTES, int(rate_mbps * 1e6 / 8 * BURST_MS / 1000))


def datapath_send_buffer_bytes(ports: Iterable[ShapedPort], userspace_tso: bool) -> int:
    """A send buffer for the userspace datapath that holds every shaped switch queue full at once."""
    per_frame = TSO_SEGMENT_TRUESIZE_BYTES if userspace_tso else FRAME_TRUESIZE_BYTES
    return sum(queue_packets(p.configured_mbps) for p in ports) * per_frame


class ShapedIntf(TCIntf):
    def bwCmds(self, bw=None, **_ignored):
        if bw is None:
            return [], " root "
        return [
            "%s qdisc add dev %s root handle 5:0 htb default 1",
            "%s class add dev %s parent 5:0 classid 5:1 htb "
            + f"rate {bw:f}Mbit burst {burst_bytes(bw)} quantum {FRAME_BYTES}",
            "%s qdisc add dev %s parent 5:1 handle 10: pfifo " + f"limit {queue_packets(bw)}",
        ], " parent 10: "


class ShapedLink(TCLink):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("cls1", ShapedIntf)
        kwargs.setdefault("cls2", ShapedIntf)
        super().__init__(*args, **kwargs)
