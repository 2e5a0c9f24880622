"""The links that cross servers: VXLAN tunnels between the servers' fabric namespaces.

A tunnel end is made in the server's own network namespace, where its UDP socket stays and meets the real
network, and is then moved into the run's fabric namespace under the name Mininet gives the switch port
(`tor2-eth3`, `eps-eth3`): Open vSwitch sees an ordinary port there. Mininet's Cluster Edition uses gretap
tunnels made the same way; VXLAN (RFC 7348) works on kernels without the ip_gre module, and one UDP port
carries every tunnel of a run, told apart by its VNI.

Each tunnel's MTU is the underlay's less the encapsulation, and every host of a multi-server fabric sends
frames no larger, so no frame is dropped or fragmented on the way (Mininet's GRE links set 1450 by hand for
the same reason).
"""

from __future__ import annotations

import json
import secrets
import subprocess
from dataclasses import asdict, dataclass

VXLAN_PORT = 4789  # IANA's port for VXLAN (RFC 7348 §5)
VXLAN_OVERHEAD = 50  # outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8 bytes (RFC 7348 §5)
ETHERNET_MTU = 1500
MAX_VNI = 2**24 - 1  # 24 bits (RFC 7348 §5)


@dataclass(frozen=True)
class TunnelEnd:
    """One server's end of a tunnel: its device name there, the VNI both ends share, and the two servers'
    addresses (this end's own first)."""

    name: str
    vni: int
    local_ip: str
    remote_ip: str
    address: str | None = None  # CIDR on the device (the control tunnels); the fabric's ports have none

    def as_dict(self) -> dict:
        return asdict(self)


def vni_base(tunnels: int) -> int:
    """A random first VNI for a run's `tunnels` tunnels, so two runs between the same servers do not share one."""
    if tunnels >= MAX_VNI:
        raise ValueError(f"{tunnels} tunnels do not fit in VXLAN's {MAX_VNI} network identifiers")
    return 1 + secrets.randbelow(MAX_VNI - tunnels)


def underlay(remote_ip: str) -> tuple[str, int]:
    """The local address and the MTU of the interface this namespace reaches `remote_ip` through."""
    routes = json.loads(_ip("-j", "route", "get", remote_ip))
    if not routes or "prefsrc" not in routes[0]:
        raise RuntimeError(f"no route to server {remote_ip} from this machine")
    device = routes[0]["dev"]
    link = json.loads(_ip("-j", "link", "show", "dev", device))[0]
    return routes[0]["prefsrc"], int(link["mtu"])


def tunnel_mtu(underlay_mtu: int) -> int:
    """The largest frame a tunnel carries unfragmented, at most Ethernet's."""
    return min(ETHERNET_MTU, underlay_mtu - VXLAN_OVERHEAD)


def create_tunnel(end: TunnelEnd, mtu: int, netns: str) -> None:
    """Make the tunnel end here and move it into `netns`, up, with its MTU and address."""
    _ip(
        "link", "add", end.name, "type", "vxlan", "id", str(end.vni), "local", end.local_ip, "remote", end.remote_ip,
        "dstport", str(VXLAN_PORT), "nolearning",
    )  # fmt: skip
    try:
        _ip("link", "set", end.name, "netns", netns)
    except RuntimeError:
        _ip("link", "del", end.name)  # not left behind in the server's own namespace
        raise
    inside = ["ip", "netns", "exec", netns, "ip"]
    _run([*inside, "link", "set", end.name, "mtu", str(mtu), "up"])
    if end.address is not None:
        _run([*inside, "addr", "add", end.address, "dev", end.name])


def _ip(*args: str) -> str:
    return _run(["ip", *args])


def _run(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout
