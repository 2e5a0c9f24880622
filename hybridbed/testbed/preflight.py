"""Before a multi-server run builds anything: can every further server take its racks?

For each server, over ssh (paramiko, with the same identity and known hosts the run's ssh uses): it answers as
root, runs the same hybridbed, Mininet and Open vSwitch versions and Open vSwitch datapath (kernel or userspace)
as this machine, has the cgroup hierarchy, the tools the run uses and the hosts' TCP congestion control, keeps
its clock within MAX_CLOCK_OFFSET_S of this one's (flow and OCS times from every server land on one timeline),
and has a core free for its Open vSwitch, whose userspace datapath forwards all the traffic of the racks placed
there in one thread. Every problem is reported at once, per server.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path

import mininet.net
import paramiko
import psutil

from hybridbed.config.servers import ServersNotReady, ServerSpec
from hybridbed.testbed.host_stack import available_congestion_controls, congestion_control_problems
from hybridbed.testbed.ovs import kernel_datapath_available

# Half the emulated JobPacker scenarios' 10 ms reconfiguration delay (scenarios/jobpacker-geni*.yaml): times from
# different servers fall on the same side of a reconfiguration as they happened.
MAX_CLOCK_OFFSET_S = 0.005
MIN_FREE_CORES = 1.0  # the userspace datapath's forwarding thread (ovs-vswitchd without DPDK)
IDLE_SAMPLE_S = 0.5
CLOCK_SAMPLES = 8
CONNECT_TIMEOUT_S = 10.0
# what the run's part runs there (tcpdump for capture_packets; setup.sh installs them all)
TOOLS = ("ip", "nsenter", "mnexec", "ovs-vsctl", "ovs-vswitchd", "ovsdb-server", "ethtool", "tc", "socat", "tcpdump")

_CLOCK = "import sys, time\nfor _ in sys.stdin:\n    print(repr(time.time()))"


@dataclass(frozen=True)
class ServerFacts:
    uid: int
    hybridbed: str
    mininet: str
    ovs: str
    cgroup: bool
    datapath: str  # Open vSwitch's: "kernel" where the openvswitch module loads, else "user"
    missing: list[str]
    congestion_controls: list[str]  # the TCP congestion controls its kernel has
    cpus: int
    idle_cores: float


def resolve_server(spec: ServerSpec) -> str:
    """The server's IPv4 address."""
    try:
        return str(socket.getaddrinfo(spec.host, spec.port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0])
    except socket.gaierror as err:
        raise ServersNotReady(f"server {spec.host}: cannot resolve the name ({err.strerror})") from None


def gather_facts() -> ServerFacts:
    """This machine's facts (on a further server: `python -m hybridbed.testbed.preflight` prints them)."""
    cpus = os.cpu_count() or 1
    return ServerFacts(
        uid=os.geteuid(),
        hybridbed=version("hybridbed"),
        mininet=mininet.net.VERSION,
        ovs=subprocess.run(["ovs-vsctl", "--version"], capture_output=True, text=True).stdout.split("\n")[0],
        cgroup=any((Path("/sys/fs/cgroup") / h / "cgroup.procs").exists() for h in ("pids", "unified", "")),
        datapath="kernel" if kernel_datapath_available() else "user",
        missing=[tool for tool in TOOLS if shutil.which(tool) is None],
        congestion_controls=available_congestion_controls(),
        cpus=cpus,
        idle_cores=cpus * (100 - psutil.cpu_percent(interval=IDLE_SAMPLE_S)) / 100,
    )


def server_facts(spec: ServerSpec, address: str) -> tuple[ServerFacts, float]:
    """The facts of the server at `address`, and its clock's offset from this machine's (s; the round trip's
    midpoint)."""
    client = paramiko.SSHClient()
    if spec.known_hosts is not None:
        client.load_host_keys(str(spec.known_hosts))
    else:
        client.load_system_host_keys()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(
            address,
            port=spec.port,
            username=spec.user,
            key_filename=str(spec.key_file) if spec.key_file is not None else None,
            timeout=CONNECT_TIMEOUT_S,
            allow_agent=spec.key_file is None,
        )
        python = spec.interpreter
        _, stdout, stderr = client.exec_command(shlex.join([python, "-m", "hybridbed.testbed.preflight"]), timeout=60)
        out = stdout.read().decode()
        if stdout.channel.recv_exit_status() != 0:
            raise ServersNotReady(
                f"server {spec.host}: {python} cannot report its hybridbed installation: "
                f"{stderr.read().decode().strip().splitlines()[-1:] or 'no output'}"
            )
        return ServerFacts(**json.loads(out)), _clock_offset(client, python)
    except (paramiko.SSHException, OSError) as err:
        raise ServersNotReady(f"server {spec.host}: ssh as {spec.user} on port {spec.port} failed: {err}") from None
    finally:
        client.close()


def _clock_offset(client: paramiko.SSHClient, python: str) -> float:
    """The server's clock minus this machine's (s), as NTP estimates it: the server's reading against the
    midpoint of the request's round trip, from the sample with the shortest round trip. The server's clock is
    read by one process that answers every line it gets, so a sample's round trip is the network's alone."""
    stdin, stdout, _ = client.exec_command(shlex.join([python, "-u", "-c", _CLOCK]), timeout=10)
    samples = []
    try:
        for _ in range(CLOCK_SAMPLES):
            sent = time.time()
            stdin.write("\n")
            stdin.flush()
            reading = float(stdout.readline())
            received = time.time()
            samples.append((received - sent, reading - (sent + received) / 2))
    finally:
        stdin.close()
    return min(samples)[1]


def problems(
    spec: ServerSpec, facts: ServerFacts, offset_s: float, here: ServerFacts, racks: int, congestion_control: str
) -> list[str]:
    """What keeps the server from taking `racks` racks of this run, whose hosts run `congestion_control`, one line
    each."""
    found = []
    if facts.uid != 0:
        found.append(f"runs commands as uid {facts.uid}; the emulation needs root")
    for name in ("hybridbed", "mininet", "ovs", "datapath"):
        if getattr(facts, name) != getattr(here, name):
            found.append(f"{name} {getattr(facts, name)!r} differs from this machine's {getattr(here, name)!r}")
    if not facts.cgroup:
        found.append("has no cgroup hierarchy under /sys/fs/cgroup (pids, unified or v2)")
    if facts.missing:
        found.append(f"lacks {', '.join(facts.missing)}")
    found += congestion_control_problems(congestion_control, facts.congestion_controls)
    if abs(offset_s) > MAX_CLOCK_OFFSET_S:
        found.append(
            f"clock is {offset_s * 1000:+.1f} ms off this machine's (at most {MAX_CLOCK_OFFSET_S * 1000:g} ms: "
            "synchronise both with NTP or PTP)"
        )
    if facts.idle_cores < MIN_FREE_CORES:
        found.append(
            f"has {facts.idle_cores:.1f} idle cores (of {facts.cpus}); its Open vSwitch needs {MIN_FREE_CORES:g} "
            f"for the {racks} racks placed there"
        )
    return [f"server {spec.host}: {problem}" for problem in found]


def preflight(servers: list[ServerSpec], rack_server: list[int], congestion_control: str) -> list[str]:
    """Each server's IPv4 address, the one checked and the one the run's tunnels and ssh sessions go to; raise
    ServersNotReady naming every problem of every server if there is any."""
    here = gather_facts()
    found = []
    addresses = []
    for index, spec in enumerate(servers, start=1):
        try:
            addresses.append(resolve_server(spec))
            facts, offset = server_facts(spec, addresses[-1])
        except ServersNotReady as err:
            found.append(str(err))
            continue
        found += problems(spec, facts, offset, here, rack_server.count(index), congestion_control)
    if found:
        raise ServersNotReady("servers not ready:\n  " + "\n  ".join(found))
    return addresses


def main() -> int:
    print(json.dumps(asdict(gather_facts())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
