"""Rate-limited links: Mininet's TCLink with an explicit HTB quantum.

At these rates HTB's default r2q yields quanta above 200 kB and tc warns on every link. Each shaped
interface has exactly one class, so the quantum does not affect sharing; one MTU-sized frame is set.
"""
from __future__ import annotations

from mininet.link import TCIntf, TCLink


class ShapedIntf(TCIntf):
    def bwCmds(self, bw=None, **_ignored):
        if bw is None:
            return [], " root "
        return [
            "%s qdisc add dev %s root handle 5:0 htb default 1",
            "%s class add dev %s parent 5:0 classid 5:1 htb " + f"rate {bw:f}Mbit burst 15k quantum 1514",
        ], " parent 5:1 "


class ShapedLink(TCLink):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("cls1", ShapedIntf)
        kwargs.setdefault("cls2", ShapedIntf)
        super().__init__(*args, **kwargs)
