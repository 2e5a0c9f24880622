"""A private Open vSwitch instance for one run: its own database, sockets and daemons.

The run's bridges never appear in the system OVS (or anybody else's), and stopping the run stops
only these daemons. Mininet's ovs-vsctl/ovs-ofctl calls find this instance through OVS_RUNDIR.
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

VSWITCH_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
SO_SNDBUFFORCE = 32  # <asm-generic/socket.h>: root may exceed net.core.wmem_max
SYS_PIDFD_GETFD = 438  # the generic syscall table's number (x86-64 and arm64 alike); Python has no wrapper


def kernel_datapath_available() -> bool:
    """True where the openvswitch kernel module is loaded or loadable; else the userspace datapath is used."""
    if Path("/sys/module/openvswitch").exists():
        return True
    probe = subprocess.run(["modprobe", "-q", "openvswitch"], capture_output=True)
    return probe.returncode == 0 and Path("/sys/module/openvswitch").exists()


class PrivateOVS:
    """ovsdb-server and ovs-vswitchd running from `rundir`, started in the caller's network namespace."""

    def __init__(self, rundir: Path, preexec: Callable[[], None], userspace_tso: bool = False):
        self.rundir = rundir
        self._preexec = preexec
        self.userspace_tso = userspace_tso
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def env(self) -> dict[str, str]:
        """Environment that points OVS command-line tools at this instance."""
        d = str(self.rundir)
        return {"OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d, "OVS_SYSCONFDIR": d}

    def vsctl(self, *args: str, timeout: float = 10) -> str:
        result = subprocess.run(
            ["ovs-vsctl", f"--timeout={int(timeout)}", *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout + 5,
        )
        if result.returncode != 0:
            raise RuntimeError(f"ovs-vsctl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def start(self) -> None:
        if not VSWITCH_SCHEMA.exists():
            raise RuntimeError(
                f"Open vSwitch schema {VSWITCH_SCHEMA} not found: install openvswitch-switch (setup.sh does)"
            )
        self.rundir.mkdir(parents=True, exist_ok=True)
        db = self.rundir / "conf.db"
        subprocess.run(["ovsdb-tool", "create", str(db), str(VSWITCH_SCHEMA)], check=True, capture_output=True)
        self._spawn(
            "ovsdb-server",
            [
                "ovsdb-server",
                str(db),
                f"--remote=punix:{self.rundir / 'db.sock'}",
                f"--unixctl={self.rundir / 'ovsdb-server.ctl'}",
                f"--pidfile={self.rundir / 'ovsdb-server.pid'}",
                f"--log-file={self.rundir / 'ovsdb-server.log'}",
                "--no-chdir",
            ],
        )
        self._wait_for(self.rundir / "db.sock", "ovsdb-server")
        self.vsctl("--no-wait", "init")
        if self.userspace_tso:  # read once, when ovs-vswitchd starts
            self.vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true")
        self._spawn(
            "ovs-vswitchd",
            [
                "ovs-vswitchd",
                f"unix:{self.rundir / 'db.sock'}",
                f"--unixctl={self.rundir / 'ovs-vswitchd.ctl'}",
                f"--pidfile={self.rundir / 'ovs-vswitchd.pid'}",
                f"--log-file={self.rundir / 'ovs-vswitchd.log'}",
                "--no-chdir",
            ],
        )
        self._wait_for(self.rundir / "ovs-vswitchd.ctl", "ovs-vswitchd")

    @property
    def vswitchd_pid(self) -> int:
        """ovs-vswitchd's process: its main thread is the userspace datapath's forwarding thread (no DPDK ports,
        so no poll-mode threads), and it applies flow entries and answers barriers too."""
        return self.processes["ovs-vswitchd"].pid

    def set_send_buffer(self, nbytes: int, timeout_s: float = 5.0) -> None:
        """Give the userspace datapath's send socket a buffer of `nbytes` (see shaping.py for why).

        ovs-vswitchd sends on every port through one unbound packet socket, made at its first send, with the
        kernel's default buffer and no option to change it; a duplicate of its descriptor (pidfd_getfd) sets
        the buffer of that very socket. Waits up to `timeout_s` for the socket to appear."""
        pid = self.vswitchd_pid
        deadline = time.monotonic() + timeout_s
        while (fd := _send_socket_fd(pid)) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"ovs-vswitchd made no send socket within {timeout_s:g} s of its first send")
            time.sleep(0.02)
        pidfd = os.pidfd_open(pid)
        try:
            local = ctypes.CDLL(None, use_errno=True).syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
            if local < 0:
                raise OSError(ctypes.get_errno(), f"pidfd_getfd on ovs-vswitchd's descriptor {fd}")
        finally:
            os.close(pidfd)
        with socket.socket(fileno=local) as sock:  # closes the duplicate only
            sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, nbytes)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.rundir / f"{name}.stderr", "wb")  # noqa: SIM115 (the daemon's stderr for its whole life)
        self.processes[name] = subprocess.Popen(
            argv,
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=self._preexec,
        )
        log.close()

    def _wait_for(self, path: Path, name: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.processes[name].poll() is not None:
                raise RuntimeError(f"{name} exited at start-up: {self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not create {path} within {timeout:.0f} s")
            time.sleep(0.02)

    def log_tail(self, name: str, lines: int = 5) -> str:
        text = ""
        for suffix in (".stderr", ".log"):
            path = self.rundir / f"{name}{suffix}"
            if path.exists():
                text += path.read_text(errors="replace")
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self) -> None:
        """Stop vswitchd before the database, each gracefully first."""
        for name in ("ovs-vswitchd", "ovsdb-server"):
            proc = self.processes.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def packet_sockets(proc_net_packet: str) -> list[dict[str, str]]:
    """The sockets of a /proc/<pid>/net/packet listing, each by its header's fields (sk RefCnt Type Proto Iface R
    Rmem User Inode)."""
    header, *lines = proc_net_packet.splitlines()
    names = header.split()
    return [dict(zip(names, line.split(), strict=True)) for line in lines if line.strip()]


def unbound_packet_sockets(proc_net_packet: str) -> set[str]:
    """Inodes of the unbound raw packet sockets in a /proc/<pid>/net/packet listing: the userspace datapath's
    send socket is one (its receive sockets are bound to a port and a protocol)."""
    return {
        s["Inode"]
        for s in packet_sockets(proc_net_packet)
        if s["Type"] == str(socket.SOCK_RAW) and s["Proto"] == "0000" and s["Iface"] == "0"
    }


def queued_packet_bytes(proc_net_packet: str) -> int:
    """Bytes in the receive queues of the packet sockets of a /proc/<pid>/net/packet listing (their Rmem: the
    memory the queued packets take, so a little more than their bytes); the userspace datapath reads the switch
    ports through such sockets."""
    return sum(int(s["Rmem"]) for s in packet_sockets(proc_net_packet))


def _send_socket_fd(pid: int) -> int | None:
    """The descriptor of process `pid`'s unbound raw packet socket, if it has one."""
    sockets = {f"socket:[{inode}]" for inode in unbound_packet_sockets(Path(f"/proc/{pid}/net/packet").read_text())}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") in sockets:
                return int(name)
        except OSError:  # closed meanwhile
            continue
    return None
