"""What a run holds on each server it uses: its manifest (watched from the first step), its cgroup, its fabric
namespace with the tunnel ends of the links that cross servers, and a private Open vSwitch.

The first server's HybridNetwork and every further server's `remote_part` build the same thing with it, and
tear it down the same way, so `hybridbed clean` and the watchdog work alike on every server.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from hybridbed.testbed.cleanup import clean_run
from hybridbed.testbed.isolation import FabricNamespace, RunCgroup
from hybridbed.testbed.ovs import PrivateOVS
from hybridbed.testbed.runs import RunRecord
from hybridbed.testbed.tunnels import TunnelEnd, create_tunnel
from hybridbed.testbed.watchdog import start_watchdog
from hybridbed.workers.cgroups import CgroupLayout

PROBE_ETHERTYPE = "88b5"  # IEEE 802 local experimental: a frame no host stack takes up


class ServerRun:
    """One server's share of a run. `start` records each step in the manifest before taking it; `stop` (or
    the watchdog, should the owning process die first) removes everything recorded."""

    def __init__(self, userspace_tso: bool, run_id: str | None = None):
        self.userspace_tso = userspace_tso
        self.record = RunRecord.create(run_id)
        self.cgroup: RunCgroup | None = None
        self.namespace: FabricNamespace | None = None
        self.ovs: PrivateOVS | None = None
        start_watchdog(self.record.manifest_path)

    @property
    def run_id(self) -> str:
        return self.record.run_id

    def isolate(self) -> None:
        """Create the run's cgroup and its fabric namespace."""
        self.cgroup = RunCgroup.for_run(self.run_id)
        self.record.set(cgroups=[str(self.cgroup.path)])
        self.cgroup.create()
        self.namespace = FabricNamespace(self.run_id)
        self.record.set(netns=self.namespace.name)
        self.namespace.create()

    def start(self, tunnels: Sequence[TunnelEnd] = (), tunnel_mtu: int = 0) -> None:
        """Move the tunnel ends into the namespace (made here, in the server's own one), enter it and start Open
        vSwitch there. The calling thread stays in the namespace."""
        assert self.namespace is not None and self.cgroup is not None, "isolate() first"
        for end in tunnels:
            create_tunnel(end, tunnel_mtu, self.namespace.name)
        self.namespace.enter()
        self.ovs = PrivateOVS(
            self.record.state_dir / "ovs", preexec=self.cgroup.join_self, userspace_tso=self.userspace_tso
        )
        self.ovs.start()
        for name, proc in self.ovs.processes.items():
            self.record.add_process(proc.pid, name)

    def ovs_environment(self) -> dict[str, str]:
        """What points OVS's command-line tools (Mininet's included) at this run's Open vSwitch."""
        assert self.ovs is not None
        return self.ovs.env

    def size_send_buffer(self, bridge: str, port: int, host_mac: str, nbytes: int) -> None:
        """In the userspace datapath, a send buffer that holds every shaped switch queue full (shaping.py). Its
        socket is made at the datapath's first send, so one frame goes out first: out of `bridge`'s `port` to
        the host at `host_mac`, of the local experimental ethertype, which hosts ignore."""
        assert self.ovs is not None
        frame = host_mac.replace(":", "") + "000000000000" + PROBE_ETHERTYPE + "00" * 46
        subprocess.run(
            [
                "ovs-ofctl",
                "-O",
                "OpenFlow13",
                "packet-out",
                bridge,
                f"in_port=controller packet={frame} actions=output:{port}",
            ],
            env={**os.environ, **self.ovs.env},
            check=True,
            capture_output=True,
        )
        self.ovs.set_send_buffer(nbytes)

    def create_task_cgroups(self) -> dict:
        """The roots of the run's task cgroups on this server (one per hierarchy), recorded before they are
        made: `roots` as they are, `seen_from_hosts` as the hosts' agents reach them, and the cgroup `version`.
        Mininet hosts have a /sys of their own without the cgroup hierarchies; this process's root still has
        them, so agents reach them through it for as long as it runs (as long as the run)."""
        layout = CgroupLayout.detect()
        roots = layout.task_roots(self.run_id)
        self.record.set(cgroups=self.record.manifest.cgroups + [str(r) for r in roots])
        layout.create_task_roots(self.run_id)
        me = Path(f"/proc/{os.getpid()}/root")
        return {
            "roots": [str(r) for r in roots],
            "seen_from_hosts": [str(me / r.relative_to("/")) for r in roots],
            "version": layout.version,
        }

    def relay(self, listen: str, connect: str, role: str) -> None:
        """A socat relay (http://www.dest-unreach.org/socat/) in the run's namespace and cgroup, from `listen` to
        `connect` (socat addresses), one connection per client; recorded as `role`."""
        assert self.cgroup is not None
        with open(self.record.state_dir / f"{role.replace(' ', '-')}.log", "ab") as log:
            proc = subprocess.Popen(
                ["socat", f"{listen},fork,reuseaddr", connect],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=self.cgroup.join_self,
            )
        self.record.add_process(proc.pid, role)

    def stop(self, status: str) -> list[str]:
        """Stop Open vSwitch, leave the namespace and remove everything the manifest records."""
        try:
            if self.ovs is not None:
                self.ovs.stop()
        finally:
            if self.namespace is not None:
                self.namespace.leave()
            self.record.set(status=status)
            done = clean_run(self.record.manifest)
        return done
