"""The emulated hosts' network stack, set in each host's namespace before its first connection.

The fabric is IPv4 only: IPv6 would add router solicitations and MLD reports on every link. TCP runs the
scenario's congestion control (`fabric.tcp_congestion_control`): a new namespace otherwise inherits the
machine's default, and how often a shuffle connection loses segments at a switch queue, and waits for a
timer, depends on it (docs/network.md, "The hosts' congestion control").

The congestion control is set on the host's route to the fabric (`congctl`, the route metric RTAX_CC_ALGO),
which every connection over it takes, the ones it opens and the ones it accepts. A namespace's own default
(`net.ipv4.tcp_congestion_control`) would do too, but outside the machine's namespace Linux sets it only to an
algorithm in the machine-wide `tcp_allowed_congestion_control` list, and hybridbed leaves the machine's
settings alone.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from hybridbed.config.addressing import NETWORK

IPV6_OFF = ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
AVAILABLE_CONGESTION_CONTROLS = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


def available_congestion_controls() -> list[str]:
    """The congestion controls this machine's kernel has (built in or loaded): the ones a route can name."""
    return AVAILABLE_CONGESTION_CONTROLS.read_text().split()


def congestion_control_problems(wanted: str, available: list[str]) -> list[str]:
    """Why a host cannot run `wanted` (one line), or nothing."""
    if wanted in available:
        return []
    return [
        f"fabric.tcp_congestion_control: {wanted!r} is not in this kernel's "
        f"tcp_available_congestion_control ({' '.join(available)}); `modprobe tcp_{wanted}` loads it if it is a module"
    ]


def host_stack_command(intf: str, ip: str, congestion_control: str) -> str:
    """The shell command that sets up the stack of the host at `ip` on `intf`, in its namespace."""
    route = ["ip", "route", "change", str(NETWORK), "dev", intf, "proto", "kernel", "scope", "link", "src", ip]
    return f"{shlex.join(IPV6_OFF)}; {shlex.join([*route, 'congctl', congestion_control])}"


def route_congestion_control(route_line: str) -> str | None:
    """The congestion control an `ip route show` line names (None: the namespace's default)."""
    words = route_line.split()
    return words[words.index("congctl") + 1] if "congctl" in words else None
