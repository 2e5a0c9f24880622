"""Keeping a run apart from everything else on the machine.

FabricNamespace: each run's switches, private Open vSwitch and controller live in a network namespace
of their own. The userspace datapath creates fixed-name devices (`ovs-netdev`) and Mininet names
switch ports `<switch>-ethN`, so without this two runs, or a run and somebody else's Mininet, collide.

RunCgroup: every process the run starts joins one cgroup, so cleanup ends exactly the run's processes,
by pid, including ones started inside Mininet hosts, and nothing else.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

from hybridbed.testbed.host_stack import IPV6_OFF
from hybridbed.workers.cgroups import CGROUP_GROUP, CGROUP_ROOT, CgroupTree

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns failed: {os.strerror(err)}")


class FabricNamespace:
    """A named network namespace (visible in `ip netns list`) that the calling thread can enter and leave."""

    def __init__(self, name: str):
        self.name = name
        self.path = NETNS_DIR / name
        self._previous_fd: int | None = None

    def create(self) -> None:
        subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True, text=True)
        subprocess.run(["ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "netns", "exec", self.name, *IPV6_OFF], check=True, capture_output=True)

    def enter(self) -> None:
        """Move this thread (and every process it starts from now on) into the namespace."""
        self._previous_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            _setns(fd)
        finally:
            os.close(fd)

    def step_outside(self) -> None:
        """In a child process started from inside (a preexec function): back to the namespace the parent
        entered from, to reach other machines (the namespace has no route out). Nothing to do before entering."""
        if self._previous_fd is not None:
            _setns(self._previous_fd)

    def leave(self) -> None:
        if self._previous_fd is None:
            return
        try:
            _setns(self._previous_fd)
        finally:
            os.close(self._previous_fd)
            self._previous_fd = None

    def delete(self) -> None:
        """Remove the namespace; its interfaces (veths, OVS taps) go with it once no process holds it. Raises
        RuntimeError, with what `ip` said, if it is still there."""
        if not self.path.exists():
            return
        result = subprocess.run(["ip", "netns", "delete", self.name], check=False, capture_output=True, text=True)
        if self.path.exists():
            raise RuntimeError(f"ip netns delete {self.name} failed: {result.stderr.strip() or result.returncode}")

    def exists(self) -> bool:
        return self.path.exists()


def _cgroup_base() -> Path:
    """The hierarchy that tracks processes: v1's `pids` controller if mounted, else the v2 tree."""
    for candidate in (CGROUP_ROOT / "pids", CGROUP_ROOT / "unified", CGROUP_ROOT):
        if (candidate / "cgroup.procs").exists():
            return candidate
    raise RuntimeError(f"no cgroup hierarchy found under {CGROUP_ROOT}")


class RunCgroup(CgroupTree):
    """The cgroup every process of a run joins (in the hierarchy that tracks processes), with the task
    cgroups below it."""

    @classmethod
    def for_run(cls, run_id: str) -> RunCgroup:
        return cls(_cgroup_base() / CGROUP_GROUP / run_id)
