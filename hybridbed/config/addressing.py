"""The static address and port plan of a hybrid DCN.

The topology builder and the controller both derive every name, address, datapath id and port number
from this one plan, so forwarding can be installed proactively: no ARP, no flooding, no learning.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from hybridbed.config.fabric import FabricSpec

HOST_PREFIX_LEN = 16  # every host sits in 10.0.0.0/16: all on-link, so hosts need only static ARP
NETWORK = ipaddress.ip_network("10.0.0.0/16")
EPS_DPID = 0xE000
OCS_DPID = 0xC000


@dataclass(frozen=True)
class TorCorePort:
    """A ToR port towards the core, as links.csv names it: `tor<r>-eps`, or `tor<r>-ocs<k>` for OCS port k."""

    rack: int
    switch: str
    port: int
    link: str
    ocs_port: int | None  # None: the EPS uplink


@dataclass(frozen=True)
class HostAddress:
    rack: int
    index: int
    name: str
    ip: str
    mac: str
    tor_port: int


class FabricPlan:
    """Names, addresses and port numbers for a FabricSpec.

    ToR r: host h on port h+1, the EPS uplink on port H+1, OCS port k on port H+2+k.
    EPS core: ToR r on port r+1. OCS: (rack r, OCS port k) on port r*K+k+1.
    """

    def __init__(self, spec: FabricSpec):
        self.spec = spec
        self.racks = spec.racks
        self.hosts_per_rack = spec.hosts_per_rack
        self.ocs_ports_per_tor = spec.ocs_ports_per_tor if spec.has_ocs else 0

    # hosts -------------------------------------------------------------------------------------
    def host(self, rack: int, index: int) -> HostAddress:
        self._check_rack(rack)
        if not 0 <= index < self.hosts_per_rack:
            raise ValueError(f"host index {index} is outside 0..{self.hosts_per_rack - 1}")
        return HostAddress(
            rack=rack,
            index=index,
            name=f"r{rack}h{index}",
            ip=f"10.0.{rack}.{index + 1}",
            mac=f"02:00:00:00:{rack:02x}:{index + 1:02x}",
            tor_port=index + 1,
        )

    def hosts(self) -> list[HostAddress]:
        return [self.host(r, h) for r in range(self.racks) for h in range(self.hosts_per_rack)]

    def rack_subnet(self, rack: int) -> tuple[str, str]:
        """(network, netmask) of a rack, as OpenFlow ipv4_dst masked-match arguments."""
        self._check_rack(rack)
        return f"10.0.{rack}.0", "255.255.255.0"

    def rack_of_ip(self, ip: str) -> int:
        addr = ipaddress.ip_address(ip)
        if addr not in NETWORK:
            raise ValueError(f"{ip} is not a hybridbed host address")
        return int(str(addr).split(".")[2])

    # switches ----------------------------------------------------------------------------------
    @staticmethod
    def tor_name(rack: int) -> str:
        return f"tor{rack}"

    @staticmethod
    def port_interface(switch: str, port: int) -> str:
        """The interface Mininet makes for a switch's port: `<switch>-eth<port>`."""
        return f"{switch}-eth{port}"

    @staticmethod
    def tor_dpid(rack: int) -> int:
        return rack + 1

    def rack_of_tor_dpid(self, dpid: int) -> int | None:
        rack = dpid - 1
        return rack if 0 <= rack < self.racks else None

    def switch_names(self) -> dict[int, str]:
        """Datapath id -> switch name, for every switch this fabric has."""
        names = {self.tor_dpid(r): self.tor_name(r) for r in range(self.racks)}
        names[EPS_DPID] = "eps"
        if self.spec.has_ocs:
            names[OCS_DPID] = "ocs"
        return names

    # ports -------------------------------------------------------------------------------------
    @property
    def tor_eps_port(self) -> int:
        return self.hosts_per_rack + 1

    def tor_ocs_port(self, k: int) -> int:
        self._check_ocs_port(k)
        return self.hosts_per_rack + 2 + k

    def tor_core_ports(self) -> list[TorCorePort]:
        """Every ToR's EPS uplink and OCS ports, rack by rack: the links whose counters a run records."""
        ports = []
        for rack in range(self.racks):
            tor = self.tor_name(rack)
            ports.append(TorCorePort(rack, tor, self.tor_eps_port, f"{tor}-eps", None))
            ports += [
                TorCorePort(rack, tor, self.tor_ocs_port(k), f"{tor}-ocs{k}", k) for k in range(self.ocs_ports_per_tor)
            ]
        return ports

    @staticmethod
    def eps_port(rack: int) -> int:
        return rack + 1

    def ocs_port(self, rack: int, k: int) -> int:
        self._check_rack(rack)
        self._check_ocs_port(k)
        return rack * self.ocs_ports_per_tor + k + 1

    def _check_rack(self, rack: int) -> None:
        if not 0 <= rack < self.racks:
            raise ValueError(f"rack {rack} is outside 0..{self.racks - 1}")

    def _check_ocs_port(self, k: int) -> None:
        if not 0 <= k < self.ocs_ports_per_tor:
            raise ValueError(f"OCS port {k} is outside 0..{self.ocs_ports_per_tor - 1}")
