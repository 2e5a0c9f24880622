"""Bring-up and tear-down of an emulated hybrid DCN: namespace, cgroup, private OVS, controller, Mininet.

Usage:
    with HybridNetwork(FabricSpec(racks=4, hosts_per_rack=2), OcsSpec()) as net:
        net.host(0, 0).cmd("ping -c1", net.plan.host(1, 0).ip)
        net.controller.set_circuits([{"src_rack": 0, "dst_rack": 1}])

Every step is recorded in the run manifest before it happens, so `hybridbed clean` can undo a run
that crashed or was killed at any point. The calling thread runs inside the fabric namespace
between start() and stop(); everything it spawns meanwhile starts there too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host, Node, OVSSwitch, RemoteController

from hybridbed.config.addressing import EPS_DPID, HOST_PREFIX_LEN, OCS_DPID, FabricPlan
from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.config.servers import ServerSpec, place_racks
from hybridbed.controller.client import DEFAULT_REST_PORT, FabricClient
from hybridbed.testbed.host_stack import host_stack_command, route_congestion_control
from hybridbed.testbed.interrupts import deferred_interrupts
from hybridbed.testbed.isolation import RunCgroup
from hybridbed.testbed.ovs import kernel_datapath_available
from hybridbed.testbed.preflight import preflight
from hybridbed.testbed.remote import (
    CrossingLink,
    RemoteRunHost,
    RemoteRunSwitch,
    RemoteServer,
    plan_tunnels,
)
from hybridbed.testbed.runs import RunRecord
from hybridbed.testbed.server_run import ServerRun
from hybridbed.testbed.shaping import datapath_send_buffer_bytes, shaped_ports
from hybridbed.testbed.tunnels import ETHERNET_MTU, TunnelEnd, tunnel_mtu, underlay

OPENFLOW_PORT = 6653
CONTROL_RELAY_PORT = 6654  # further servers' workers reach the scheduler here, over their control tunnels
CONTROLLER_POLL_S = 0.2  # how often the supervisor looks whether the controller still runs
MAX_CONTROLLER_RESTARTS = 5  # a controller that keeps dying is left dead (its log says why)
OVS_MAX_BACKOFF_MS = 1000  # a switch's longest wait between attempts to reach its controller (OVS: 8000)
OFFLOADS_OFF = "tx off rx off tso off gso off gro off"
# With userspace TSO, Open vSwitch carries the hosts' 64 KB segments (checksums and segmentation left to
# the kernel at the far end) instead of one packet per MTU; receive offloads stay off.
OFFLOADS_WITH_TSO = "rx off gro off"
# Linux's TCP hands the qdisc segments of several frames even with segmentation offloads off (it segments them
# in software after the qdisc), and a host link's HTB charged each segment at once: its frames then left back
# to back at the veth's speed (23-37 frames within 10 ms on a 10 Mb/s link, which carries 8), and a connection
# paced at 1 Mb/s sent 9 frames at a time, every 87-104 ms. A device limit of one frame per segment makes TCP
# send frames, which the link then shapes and TCP's pacing spaces one by one (docs/network.md, "Frames, not
# segments"). Userspace TSO sends segments.
ONE_FRAME_PER_SEGMENT = "gso_max_segs 1"


class _JoinsRunCgroup(Node):
    """Mininet starts every node shell and node command through Node._popen: make each join the run cgroup."""

    def __init__(self, name: str, run_cgroup: RunCgroup, **params):
        self.run_cgroup = run_cgroup
        super().__init__(name, **params)

    def _popen(self, cmd, **params):
        return super()._popen(cmd, preexec_fn=self.run_cgroup.join_self, **params)


class RunHost(_JoinsRunCgroup, Host):
    pass


class RunSwitch(_JoinsRunCgroup, OVSSwitch):
    pass


class FabricMininet(Mininet):
    """Mininet without its one-time fixLimits(), which raises system-wide sysctls and rlimits:
    a run must not change settings that other users of the machine depend on."""

    def __init__(self, *args, **kwargs):
        Mininet.inited = True  # Mininet.__init__ calls Mininet.init() by class name
        super().__init__(*args, **kwargs)


class FabricController(RemoteController):
    """The run's os-ken process. Its readiness is judged by its REST API (every switch connected and
    programmed), not by Mininet's telnet probe, which needs telnet and races the process start."""

    def checkListening(self) -> None:
        pass


class NetworkStartError(RuntimeError):
    """Bring-up failed; the message carries the tails of the controller and Open vSwitch logs."""


def _dpid(value: int) -> str:
    return f"{value:016x}"


class HybridNetwork:
    """The emulated fabric, on this machine alone or, given further `servers`, spread over them rack by rack
    (config/servers.py): this machine keeps the core switches and the controller."""

    def __init__(
        self,
        fabric: FabricSpec,
        ocs: OcsSpec | None = None,
        start_timeout_s: float = 60.0,
        servers: list[ServerSpec] | None = None,
    ):
        self.fabric = fabric
        self.ocs = ocs or OcsSpec()
        self.plan = FabricPlan(fabric)
        self.servers = servers or []
        self.rack_server = place_racks(fabric.racks, self.servers)  # raises on a placement that cannot be
        self.start_timeout_s = start_timeout_s
        self.local: ServerRun | None = None  # this machine's share of the run
        self.remotes: list[RemoteServer] = []
        self.host_mtu = ETHERNET_MTU
        self.controller_proc: subprocess.Popen | None = None
        self.controller = FabricClient(DEFAULT_REST_PORT)
        self.net: Mininet | None = None
        self.datapath = "kernel" if kernel_datapath_available() else "user"
        self.bringup_s: float | None = None
        self.controller_restarts: list[dict] = []  # each time the supervisor started the controller again
        self._stopping = threading.Event()
        self._controller_lock = threading.Lock()
        self._saved_env: dict[str, str | None] = {}

    @property
    def record(self) -> RunRecord | None:
        return self.local.record if self.local is not None else None

    @property
    def cgroup(self) -> RunCgroup:
        assert self.local is not None and self.local.cgroup is not None
        return self.local.cgroup

    @property
    def run_id(self) -> str:
        assert self.record is not None
        return self.record.run_id

    @property
    def event_log(self) -> Path:
        """The controller's JSON-lines log of reconfigurations, in the run's state directory."""
        assert self.record is not None
        return self.record.state_dir / "ocs_events.jsonl"

    @property
    def demand_log(self) -> Path:
        """The controller's JSON-lines log of the demand each periodic reconfiguration matched on."""
        assert self.record is not None
        return self.record.state_dir / "ocs_demand.jsonl"

    def __enter__(self) -> HybridNetwork:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # bring-up ----------------------------------------------------------------------------------
    def start(self) -> None:
        t0 = time.monotonic()
        self._stopping.clear()
        addresses = (  # before anything is built
            preflight(self.servers, self.rack_server, self.fabric.tcp_congestion_control) if self.servers else []
        )
        self.local = ServerRun(self.userspace_tso)  # watched from here on
        self.record_id = self.local.run_id
        try:
            self._isolate(addresses)
            self._start_controller()
            self._build_mininet()
            self.controller.wait_ready(self.start_timeout_s, alive=lambda: self.controller_proc.poll() is None)
            self._size_datapath_send_buffer()
            threading.Thread(target=self._supervise_controller, name="controller-supervisor", daemon=True).start()
            self.record.set(status="running")
        except BaseException as err:
            diagnostics = self._log_tails()
            self.stop(status="failed")
            if isinstance(err, Exception):
                raise NetworkStartError(f"bring-up of run {self.record_id} failed: {err}\n{diagnostics}") from err
            raise
        self.bringup_s = time.monotonic() - t0

    def _isolate(self, addresses: list[str]) -> None:
        """This machine's share of the run (cgroup, namespace, Open vSwitch) and that of every further server at
        `addresses`, those started from this machine's own namespace before this thread enters the run's."""
        assert self.local is not None
        self.local.isolate()
        here: list[TunnelEnd] = []
        if self.servers:
            routes = [underlay(ip) for ip in addresses]
            self.host_mtu = tunnel_mtu(min(route_mtu for _, route_mtu in routes))
            tunnels = plan_tunnels(self.plan, self.rack_server, addresses, [own_ip for own_ip, _ in routes])
            for spec, ip, server in zip(self.servers, addresses, tunnels):
                remote = RemoteServer(
                    spec, server.index, ip, self.local.record.state_dir, self._ssh_preexec, server.controller_ip
                )
                self.remotes.append(remote)
                part_id = f"{self.run_id}s{server.index}"
                part = {"server": spec.model_dump(mode="json"), "address": ip, "run_id": part_id}
                self.local.record.set(remote_parts=[*self.local.record.manifest.remote_parts, part])
                remote.start(part_id, server.there, self.host_mtu, self.userspace_tso)
                here += server.here
        self.local.start(here, self.host_mtu)
        for key, value in self.local.ovs_environment().items():  # Mininet's ovs-vsctl calls inherit the environment
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value

    def _ssh_preexec(self) -> None:
        """ssh clients to further servers belong to the run and reach out from this machine's own namespace."""
        self.cgroup.join_self()
        assert self.local is not None and self.local.namespace is not None
        self.local.namespace.step_outside()

    def _start_controller(self) -> None:
        state = self.record.state_dir
        (state / "fabric.json").write_text(self.fabric.model_dump_json())
        (state / "ocs.json").write_text(self.ocs.model_dump_json())
        self._launch_controller()

    def _launch_controller(self) -> None:
        """Start the controller process (again, after it died: it reads the same specs and its event log)."""
        state = self.record.state_dir
        with open(state / "controller.log", "ab") as log:
            self.controller_proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "hybridbed.controller.main",
                    "--fabric-spec",
                    str(state / "fabric.json"),
                    "--ocs-spec",
                    str(state / "ocs.json"),
                    "--of-port",
                    str(OPENFLOW_PORT),
                    "--of-host",
                    "0.0.0.0" if self.remotes else "127.0.0.1",  # the namespace's only other devices: control tunnels
                    "--rest-port",
                    str(DEFAULT_REST_PORT),
                    "--event-log",
                    str(self.event_log),
                    "--demand-log",
                    str(self.demand_log),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=self.cgroup.join_self,
            )
        self.record.add_process(self.controller_proc.pid, "controller")

    def _supervise_controller(self) -> None:
        """Restart the controller whenever it dies while the network runs (a thread, started in the run's
        namespace after bring-up). Meanwhile the switches keep their flow tables (fail-mode secure); when
        the new controller is up they reconnect and get the intended state in place of their tables."""
        while not self._stopping.wait(CONTROLLER_POLL_S):
            proc = self.controller_proc
            if proc is None or proc.poll() is None:
                continue
            with self._controller_lock:  # stop() may be ending it this very moment
                if self._stopping.is_set():
                    return
                down_at = time.time()
                giving_up = len(self.controller_restarts) >= MAX_CONTROLLER_RESTARTS
                with open(self.record.state_dir / "controller.log", "ab") as log:
                    what = "not restarting it again" if giving_up else "restarting"
                    log.write(f"hybridbed: controller pid {proc.pid} exited ({proc.returncode}); {what}\n".encode())
                if giving_up:  # the switches keep their last rules; the run goes on without OCS changes
                    return
                self._launch_controller()
                self.controller_restarts.append(
                    {"pid": proc.pid, "exit": proc.returncode, "down_at": down_at, "restarted_at": time.time()}
                )

    def _build_mininet(self) -> None:
        setLogLevel("warning")
        plan, fabric = self.plan, self.fabric
        switch_options: dict[str, Any] = {"datapath": self.datapath, "protocols": "OpenFlow13", "failMode": "secure"}
        net = FabricMininet(
            topo=None,
            build=False,
            host=partial(RunHost, run_cgroup=self.cgroup),
            switch=partial(RunSwitch, run_cgroup=self.cgroup, **switch_options),
            link=CrossingLink,
            controller=None,
            autoSetMacs=False,
            autoStaticArp=False,
        )
        self.net = net
        net.addController(FabricController("c0", ip="127.0.0.1", port=OPENFLOW_PORT))
        eps = net.addSwitch("eps", dpid=_dpid(EPS_DPID))
        ocs = net.addSwitch("ocs", dpid=_dpid(OCS_DPID)) if fabric.has_ocs else None
        remote_switch = partial(RemoteRunSwitch, **switch_options)
        for rack in range(fabric.racks):
            tor_options: dict = {}  # on this machine, the network's defaults
            host_options: dict = {}
            if (server := self.rack_server[rack]) > 0:
                remote = self.remotes[server - 1]
                tor_options = {"cls": remote_switch, "remote": remote}
                host_options = {"cls": RemoteRunHost, "remote": remote}
            tor = net.addSwitch(plan.tor_name(rack), dpid=_dpid(plan.tor_dpid(rack)), **tor_options)
            for h in range(fabric.hosts_per_rack):
                addr = plan.host(rack, h)
                host = net.addHost(addr.name, ip=f"{addr.ip}/{HOST_PREFIX_LEN}", mac=addr.mac, **host_options)
                net.addLink(host, tor, port1=0, port2=addr.tor_port, bw=fabric.host_rate_mbps)
            net.addLink(tor, eps, port1=plan.tor_eps_port, port2=plan.eps_port(rack), bw=fabric.eps_uplink_mbps)
            if ocs is not None:
                for k in range(plan.ocs_ports_per_tor):
                    net.addLink(
                        tor, ocs, port1=plan.tor_ocs_port(k), port2=plan.ocs_port(rack, k), bw=fabric.ocs_rate_mbps
                    )
        net.build()
        self._configure_interfaces()
        net.start()
        self._reconnect_quickly()

    def _size_datapath_send_buffer(self) -> None:
        """In the userspace datapath, every server's Open vSwitch gets a send buffer that holds every shaped
        switch queue full (shaping.py), primed by a frame to the first host of the first rack it holds."""
        if self.datapath != "user":
            return
        nbytes = datapath_send_buffer_bytes(shaped_ports(self.fabric), self.userspace_tso)
        for server in range(len(self.remotes) + 1):
            host = self.plan.host(self.rack_server.index(server), 0)
            bridge = self.plan.tor_name(host.rack)
            if server == 0:
                assert self.local is not None
                self.local.size_send_buffer(bridge, host.tor_port, host.mac, nbytes)
            else:
                self.remotes[server - 1].request(
                    "size_send_buffer", bridge=bridge, port=host.tor_port, host_mac=host.mac, bytes=nbytes
                )

    def _reconnect_quickly(self) -> None:
        """Switches retry a lost controller connection every second at most (OVS backs off to 8 s by default),
        so that a restarted controller has them back within a second."""
        out = subprocess.run(
            ["ovs-vsctl", "--bare", "--columns=_uuid", "list", "Controller"], capture_output=True, text=True, check=True
        ).stdout
        commands = [
            arg
            for uuid in out.split()
            for arg in ("--", "set", "Controller", uuid, f"max_backoff={OVS_MAX_BACKOFF_MS}")
        ]
        if commands:
            subprocess.run(["ovs-vsctl", *commands], check=True, capture_output=True)

    @property
    def forwarding_pid(self) -> int | None:
        """The process whose main thread forwards this machine's share of the run's packets: its Open vSwitch
        in the userspace datapath (None in the kernel's, which forwards in the kernel's own context)."""
        if self.datapath != "user" or self.local is None or self.local.ovs is None:
            return None
        return self.local.ovs.vswitchd_pid

    @property
    def userspace_tso(self) -> bool:
        """Whether the run's switches segment TCP in software: asked for, and only the userspace datapath can."""
        return self.fabric.userspace_tso and self.datapath == "user"

    def _configure_interfaces(self) -> None:
        """The hosts' stack (host_stack.py), offloads off everywhere (the userspace datapath drops TCP otherwise;
        with userspace TSO, receive offloads only), TCP segments of one frame from hosts (but with userspace TSO),
        static ARP in hosts, and hosts' frames no larger than a tunnel between servers carries."""
        offloads = OFFLOADS_WITH_TSO if self.userspace_tso else OFFLOADS_OFF
        segments = "" if self.userspace_tso else f" {ONE_FRAME_PER_SEGMENT}"
        congestion_control = self.fabric.tcp_congestion_control
        for host in self.net.hosts:
            intf = host.defaultIntf()
            neighbours = [
                f"ip neigh replace {a.ip} lladdr {a.mac} dev {intf} nud permanent"
                for a in self.plan.hosts()
                if a.name != host.name
            ]
            host.cmd(
                host_stack_command(str(intf), host.IP(), congestion_control),
                f"; ip link set dev {intf} mtu {self.host_mtu}{segments}; ethtool -K {intf} {offloads}; "
                + "; ".join(neighbours),
            )
            route = host.cmd(f"ip route show dev {intf}").strip()
            if route_congestion_control(route) != congestion_control:
                raise RuntimeError(
                    f"host {host.name}'s route to the fabric ({route!r}) does not name fabric.tcp_congestion_control "
                    f"{congestion_control!r}"
                )
            if segments and ONE_FRAME_PER_SEGMENT not in host.cmd(f"ip -d link show dev {intf}"):
                raise RuntimeError(
                    f"host {host.name}'s {intf} did not take {ONE_FRAME_PER_SEGMENT!r} (iproute2 too old?)"
                )
        for switch in self.net.switches:  # through the switch's shell: on its own server
            switch.cmd("; ".join(f"ethtool -K {intf} {offloads}" for intf in switch.intfNames() if intf != "lo"))

    # access ------------------------------------------------------------------------------------
    def racks_per_server(self) -> list[int]:
        """How many racks each server holds, this machine first."""
        return [self.rack_server.count(k) for k in range(len(self.servers) + 1)]

    def python_on(self, server: int) -> str:
        """The interpreter with hybridbed on `server` (0: this machine's)."""
        return sys.executable if server == 0 else self.remotes[server - 1].spec.interpreter

    def state_dir_on(self, server: int) -> Path:
        """The run's state directory on `server` (0: this machine)."""
        assert self.record is not None
        return self.record.state_dir if server == 0 else Path(self.remotes[server - 1].part["state_dir"])

    def task_cgroups_on(self, server: int) -> dict:
        """Create the roots of the run's task cgroups on `server` (ServerRun.create_task_cgroups)."""
        if server == 0:
            assert self.local is not None
            return self.local.create_task_cgroups()
        return self.remotes[server - 1].request("task_cgroups")

    def reach_from_every_server(self, socket_path: Path) -> list[Path]:
        """Where each server's processes reach the Unix socket at `socket_path` on this machine, this machine's
        first: on a further server, a relay's socket that carries each connection over its control tunnel."""
        paths = [socket_path]
        if self.remotes:
            assert self.local is not None
            self.local.relay(f"TCP-LISTEN:{CONTROL_RELAY_PORT}", f"UNIX-CONNECT:{socket_path}", "control relay")
            for remote in self.remotes:
                target = f"{remote.controller_ip}:{CONTROL_RELAY_PORT}"
                paths.append(Path(remote.request("relay", name=socket_path.name, target=target)["path"]))
        return paths

    def host(self, rack: int, index: int) -> Host:
        return self.net.get(self.plan.host(rack, index).name)

    # tear-down ---------------------------------------------------------------------------------
    def stop(self, status: str = "stopped") -> None:
        """Stop gracefully where possible, then remove whatever the manifest still records; a Ctrl-C meanwhile
        does not cut it short."""
        if self.record is None:
            return
        with deferred_interrupts():
            self._stop(status)

    def _stop(self, status: str) -> None:
        with self._controller_lock:
            self._stopping.set()  # the controller is not to be restarted from here on
        try:
            if self.net is not None:
                self.net.stop()
            if self.controller_proc is not None and self.controller_proc.poll() is None:
                self.controller_proc.terminate()
                self.controller_proc.wait(timeout=5)
            for remote in self.remotes:
                if remote.stop():  # its part removed what it built: nothing for cleanup to ask that server
                    gone = [p for p in self.record.manifest.remote_parts if p["address"] != remote.ip]
                    self.record.set(remote_parts=gone)
        finally:
            self.net = None
            self.remotes = []
            for key, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._saved_env.clear()
            assert self.local is not None
            self.local.stop(status)
            self.local = None

    def _log_tails(self, lines: int = 8) -> str:
        """The last lines the controller, the OVS daemons and the ssh sessions of further servers' parts wrote,
        before cleanup removes the state directory."""
        state = self.record.state_dir
        parts = []
        logs = [state / "controller.log", state / "ovs" / "ovs-vswitchd.log", state / "ovs" / "ovsdb-server.log"]
        for path in logs + [remote.log_path for remote in self.remotes]:
            if path.exists():
                tail = path.read_text(errors="replace").strip().splitlines()[-lines:]
                parts.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(parts)
