"""Rate-limited links: Mininet's TCLink with an explicit HTB quantum and a bounded queue.

At these rates HTB's default r2q yields quanta above 200 kB and tc warns on every link. Each shaped
interface has exactly one class, so the quantum does not affect sharing; one MTU-sized frame is set.

HTB's leaf queue otherwise defaults to the veth's txqueuelen (1000 packets): 1.2 s at 10 Mb/s, longer
than TCP's minimum retransmission timeout, so competing flows time out and the link runs underused.
Each link instead queues QUEUE_MS worth of full-size frames at its rate (at least MIN_QUEUE_PACKETS),
about what a datacenter switch port buffers.
"""

from __future__ import annotations

from mininet.link import TCIntf, TCLink

QUEUE_MS = 10.0
MIN_QUEUE_PACKETS = 32
FRAME_BYTES = 1514


BURST_MS = 1.0
MIN_BURST_BYTES = 2 * FRAME_BYTES


def queue_packets(rate_mbps: float) -> int:
    return max(MIN_QUEUE_PACKETS, int(rate_mbps * 1e6 / 8 * QUEUE_MS / 1000 / FRAME_BYTES))


def burst_bytes(rate_mbps: float) -> int:
    return max(MIN_BURST_BYTES, int(rate_mbps * 1e6 / 8 * BURST_MS / 1000))


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
