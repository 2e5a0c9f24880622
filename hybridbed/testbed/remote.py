"""The first server's side of a multi-server run: ssh to each further server, the run's part there
(`remote_part`), and the Mininet nodes that live there, on Mininet's Cluster Edition.

Mininet's RemoteHost and RemoteOVSSwitch run every shell and command of a node through ssh. Here each such
command runs as root in the run's fabric namespace on that server, joins the run's cgroup there and finds the
run's private Open vSwitch there; the ssh clients themselves belong to the first server's run cgroup, so
tearing down the first server ends them, and with them every session (the further server's part then removes
its share). All ssh sessions to a server share one connection (ControlMaster), opened by the run's part.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mininet.examples.cluster import RemoteMixin, RemoteOVSSwitch
from mininet.node import Host, Node

from hybridbed.config.addressing import FabricPlan
from hybridbed.config.servers import ServerSpec
from hybridbed.testbed.shaping import ShapedLink
from hybridbed.testbed.ssh import ssh_command
from hybridbed.testbed.tunnels import TunnelEnd, vni_base

REMOTE_START_TIMEOUT_S = 90.0  # the part's bring-up: namespace, cgroup, tunnels, Open vSwitch
REMOTE_STOP_TIMEOUT_S = 30.0
# Server k's control tunnel: 172.30.k.1 (this machine) to 172.30.k.2, inside the fabric namespaces only, where
# nothing else is addressed.
CONTROL_PREFIX = "172.30"


@dataclass(frozen=True)
class _ControlTunnelController:
    """The run's controller as a further server's switches reach it: over the control tunnel. Mininet's
    OVSSwitch.start reads a controller's name, protocol, IP() and port."""

    name: str
    ip: str
    port: int
    protocol: str = "tcp"

    def IP(self) -> str:  # noqa: N802 (Mininet's name)
        return self.ip


class RemoteServer:
    """One further server of the run: starts the run's part there, and wraps commands to run inside it."""

    def __init__(
        self, spec: ServerSpec, index: int, ip: str, state_dir: Path, preexec: Callable[[], None], controller_ip: str
    ):
        self.spec = spec
        self.index = index
        self.ip = ip
        self.preexec = preexec
        self.controller_ip = controller_ip  # the first server's end of this server's control tunnel
        self.log_path = state_dir / f"server{index}.log"
        self._ssh = ssh_command(spec, ip, control_path=state_dir / f"ssh{index}")
        self.proc: subprocess.Popen | None = None
        self.part: dict = {}  # the part's answer: run_id, netns, cgroup, ovs_env

    def start(self, run_id: str, tunnels: Sequence[TunnelEnd], tunnel_mtu: int, tso: bool) -> None:
        config = {
            "run_id": run_id,
            "tunnels": [end.as_dict() for end in tunnels],
            "tunnel_mtu": tunnel_mtu,
            "userspace_tso": tso,
        }
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*self._ssh, "-T", shlex.join([self.spec.interpreter, "-m", "hybridbed.testbed.remote_part"])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                preexec_fn=self.preexec,
            )
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(config) + "\n")
        self.proc.stdin.flush()
        self.part = self._answer(REMOTE_START_TIMEOUT_S)

    def request(self, op: str, timeout_s: float = 30.0, **fields: object) -> dict:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        return self._answer(timeout_s)

    def _answer(self, timeout_s: float) -> dict:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        answer = json.loads(line) if line.strip() else {"ok": False, "error": self._silence(ready != [])}
        if not answer.get("ok"):
            raise RuntimeError(f"server {self.spec.host}: {answer['error']}")
        return answer

    def _silence(self, closed: bool) -> str:
        what = "closed the connection" if closed else "did not answer"
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-5:] if self.log_path.exists() else []
        return f"the run's part there {what}" + (f": {' | '.join(tail)}" if tail else "")

    def command(self, argv: Sequence[str], tty: bool) -> list[str]:
        """An ssh command line that runs `argv` on the server, in the run's namespace and cgroup there, with the
        environment that finds the run's Open vSwitch."""
        inner = [
            "sh",
            "-c",
            f'echo $$ > {self.part["cgroup"]}/cgroup.procs && exec "$@"',
            "hybridbed",
            "nsenter",
            f"--net=/run/netns/{self.part['netns']}",
            "env",
            *(f"{key}={value}" for key, value in self.part["ovs_env"].items()),
            *argv,
        ]
        return [*self._ssh[:-1], "-tt" if tty else "-T", self._ssh[-1], shlex.join(inner)]

    def stop(self) -> bool:
        """Ask the part to remove what it built and wait for it; end the connection if it does not finish.
        True when the part finished (its ssh session ended with status 0)."""
        if self.proc is None:
            return True
        try:
            if self.proc.poll() is None and self.part:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "stop"}) + "\n")
                self.proc.stdin.close()
            return self.proc.wait(timeout=REMOTE_STOP_TIMEOUT_S) == 0
        except (OSError, subprocess.TimeoutExpired):
            self.proc.terminate()  # its stdin closes: the part tears down by itself
            self.proc.wait()
            return False
        finally:
            self.proc = None


class _OnServer(RemoteMixin):
    """A Mininet node on a further server (Mininet's RemoteMixin, with commands run inside the run there).
    Mininet registers a cleanup callback for remote servers that runs `mn -c` there; hybridbed never calls
    Mininet's cleanup, and removes only what its runs recorded."""

    def __init__(self, name: str, remote: RemoteServer, **params):
        self.remote = remote
        super().__init__(name, server=remote.spec.host, user=remote.spec.user, serverIP=remote.ip, **params)

    def _popen(self, cmd, sudo: bool = True, tt: bool = True, **params):
        """Mininet's `sudo` is moot: the ssh login is root (the preflight checks)."""
        argv = cmd.split() if isinstance(cmd, str) else list(cmd)
        params["preexec_fn"] = self._join_first_server_run
        return Node._popen(self, self.remote.command(argv, tty=tt), **params)

    def _join_first_server_run(self) -> None:
        """The ssh client joins the run's cgroup here, in a process group of its own (no terminal's Ctrl-C)."""
        self.remote.preexec()
        os.setpgrp()


class RemoteRunHost(_OnServer, Host):
    pass


class RemoteRunSwitch(_OnServer, RemoteOVSSwitch):
    def start(self, controllers) -> None:
        """Connect to each controller through this server's control tunnel."""
        super().start([_ControlTunnelController(c.name, self.remote.controller_ip, c.port) for c in controllers])


@dataclass(frozen=True)
class ServerTunnels:
    """The tunnels between the first server and further server `index`: the ends on each side, one per link
    that crosses (a rack's EPS uplink and its OCS ports) and one for the control traffic."""

    index: int
    here: list[TunnelEnd]
    there: list[TunnelEnd]

    @property
    def controller_ip(self) -> str:
        return f"{CONTROL_PREFIX}.{self.index}.1"


def plan_tunnels(
    plan: FabricPlan, rack_server: Sequence[int], server_ips: Sequence[str], first_server_ips: Sequence[str]
) -> list[ServerTunnels]:
    """Every further server's tunnels, the ends named as Mininet names the switch ports they stand for.
    `first_server_ips[k - 1]` is this machine's address towards server k (`server_ips[k - 1]`)."""
    links: dict[int, list[tuple[str, str]]] = {k: [] for k in range(1, len(server_ips) + 1)}
    for rack, server in enumerate(rack_server):
        if server == 0:
            continue
        tor = plan.tor_name(rack)
        links[server].append(
            (plan.port_interface("eps", plan.eps_port(rack)), plan.port_interface(tor, plan.tor_eps_port))
        )
        for k in range(plan.ocs_ports_per_tor):
            links[server].append(
                (plan.port_interface("ocs", plan.ocs_port(rack, k)), plan.port_interface(tor, plan.tor_ocs_port(k)))
            )
    vni = vni_base(sum(len(v) + 1 for v in links.values()))
    tunnels = []
    for server, pairs in links.items():
        ours, theirs = first_server_ips[server - 1], server_ips[server - 1]
        here = [TunnelEnd(f"ctl{server}", vni, ours, theirs, f"{CONTROL_PREFIX}.{server}.1/24")]
        there = [TunnelEnd("ctl0", vni, theirs, ours, f"{CONTROL_PREFIX}.{server}.2/24")]
        for offset, (name_here, name_there) in enumerate(pairs, start=1):
            here.append(TunnelEnd(name_here, vni + offset, ours, theirs))
            there.append(TunnelEnd(name_there, vni + offset, theirs, ours))
        vni += len(pairs) + 1
        tunnels.append(ServerTunnels(server, here, there))
    return tunnels


class CrossingLink(ShapedLink):
    """A shaped link whose two ends may sit on different servers: then its tunnel ends exist already
    (`plan_tunnels`), and Mininet only makes its interface objects (and shapes them, through each node)."""

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None, deleteIntfs=True):  # noqa: N802 (Mininet's name)
        if getattr(node1, "server", "localhost") != getattr(node2, "server", "localhost"):
            return None
        return super().makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2, deleteIntfs=deleteIntfs)
