"""Per-task cgroups with a CPU quota and a memory limit, on cgroup v1 (cpu + memory hierarchies, and the
freezer hierarchy where mounted) or v2; a task's CPU quota can change while it runs, and the task can be
frozen and thawed (suspended and resumed where it was: v1 freezer.state, v2 cgroup.freeze).

A run owns one task root per hierarchy (`<hierarchy>/hybridbed/<run-id>-tasks`), created by the
orchestrator and recorded in the run's manifest, so cleanup finds every task cgroup below it. A worker
creates one cgroup per task attempt under those roots and removes it when the task ends.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CFS_PERIOD_US = 100_000
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_GROUP = "hybridbed"  # every cgroup hybridbed creates is below <hierarchy>/hybridbed


def join_cgroup(procs_files: list[Path], pid: int) -> None:
    """Move a process into a cgroup: its pid written to the cgroup's `cgroup.procs` in every hierarchy."""
    for procs in procs_files:
        procs.write_text(str(pid))


class CgroupTree:
    """A cgroup directory, with the cgroups below it: a run's (all its processes) or one task's."""

    def __init__(self, path: Path):
        self.path = path

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=False)

    def join(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def join_self(self) -> None:
        """For use as a subprocess preexec_fn: the child joins before it executes anything."""
        self.join(os.getpid())

    def pids(self) -> list[int]:
        """Every process in this cgroup and the cgroups below it (task cgroups live below a run's roots)."""
        pids = []
        for procs in sorted(self.path.rglob("cgroup.procs")) if self.path.exists() else []:
            with contextlib.suppress(FileNotFoundError):
                pids += [int(line) for line in procs.read_text().split()]
        return pids

    def thaw_all(self) -> None:
        """Thaw every frozen cgroup here and below (a frozen process does not act on signals, not even
        SIGKILL, until thawed): v1 freezer.state, v2 cgroup.freeze, parents first."""
        if not self.path.exists():
            return
        for name, thawed in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
            for state in sorted(self.path.rglob(name), key=lambda p: len(p.parts)):
                with contextlib.suppress(FileNotFoundError):  # went meanwhile
                    state.write_text(thawed)

    def kill_all(self, grace_s: float = 2.0) -> None:
        """Thaw, then SIGTERM every member, then SIGKILL whatever is left after the grace period."""
        self.thaw_all()
        deadline = time.monotonic() + grace_s
        sig = signal.SIGTERM
        while self.pids():
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            time.sleep(0.05)
            if time.monotonic() > deadline:
                sig = signal.SIGKILL
            if time.monotonic() > deadline + 5:
                raise RuntimeError(f"processes {self.pids()} in {self.path} survive SIGKILL")

    def remove(self) -> None:
        """Remove the cgroup with the cgroups below it (deepest first), and the shared parent if no other
        run uses it."""
        below = (
            sorted((p for p in self.path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
            if self.path.exists()
            else []
        )
        for path in [*below, self.path, self.path.parent]:
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError as err:
                if err.errno not in (errno.EBUSY, errno.ENOTEMPTY) or path != self.path.parent:
                    raise


@dataclass(frozen=True)
class CgroupLayout:
    """Where task cgroups go: v1 has separate cpu, memory (and freezer) trees, v2 one tree with every controller."""

    version: int
    hierarchies: tuple[Path, ...]

    @classmethod
    def detect(cls, root: Path = CGROUP_ROOT) -> CgroupLayout:
        if (root / "cpu" / "cgroup.procs").exists() and (root / "memory" / "cgroup.procs").exists():
            freezer = (root / "freezer",) if (root / "freezer" / "cgroup.procs").exists() else ()
            return cls(1, (root / "cpu", root / "memory", *freezer))
        controllers = root / "cgroup.controllers"
        if controllers.exists() and {"cpu", "memory"} <= set(controllers.read_text().split()):
            return cls(2, (root,))
        raise RuntimeError(f"no cgroup hierarchy with cpu and memory controllers under {root}")

    def task_roots(self, run_id: str) -> list[Path]:
        return [h / CGROUP_GROUP / f"{run_id}-tasks" for h in self.hierarchies]

    def create_task_roots(self, run_id: str) -> list[Path]:
        roots = self.task_roots(run_id)
        for root in roots:
            root.mkdir(parents=True, exist_ok=False)
            if self.version == 2:
                for level in (root.parent, root):  # let the children have cpu and memory
                    (level / "cgroup.subtree_control").write_text("+cpu +memory")
        return roots


class TaskCgroup:
    """One task attempt's cgroup (one directory per hierarchy)."""

    def __init__(self, roots: list[Path], version: int, name: str):
        self.version = version
        self.paths = [root / name for root in roots]

    def create(self, cores: float, memory_mb: float) -> None:
        limit = int(memory_mb * 1024 * 1024)
        for path in self.paths:
            path.mkdir()
        if self.version == 1:
            (self.paths[0] / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
            (self.paths[1] / "memory.limit_in_bytes").write_text(str(limit))
        else:
            (self.paths[0] / "memory.max").write_text(str(limit))
        self.set_cores(cores)

    def set_cores(self, cores: float) -> None:
        """The CPU quota, at creation or while the task runs (a policy's live change of its share)."""
        quota = max(1000, int(cores * CFS_PERIOD_US))
        if self.version == 1:
            (self.paths[0] / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (self.paths[0] / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")

    def _freezer(self) -> tuple[Path, str, str]:
        """The file that freezes the task, and what to write to freeze and to thaw it."""
        if self.version == 2:
            return self.paths[0] / "cgroup.freeze", "1", "0"
        if len(self.paths) < 3:
            raise RuntimeError("no cgroup v1 freezer hierarchy is mounted: tasks cannot be suspended")
        return self.paths[2] / "freezer.state", "FROZEN", "THAWED"

    def freeze(self, timeout_s: float = 5.0) -> None:
        """Suspend every process of the task where it is; returns once the kernel says they are frozen."""
        path, frozen, _ = self._freezer()
        path.write_text(frozen)
        deadline = time.monotonic() + timeout_s
        while not self.frozen():
            if time.monotonic() > deadline:
                raise RuntimeError(f"task cgroup {path.parent} did not freeze within {timeout_s:g} s")
            time.sleep(0.005)

    def thaw(self) -> None:
        """Resume the task's processes where they were."""
        path, _, thawed = self._freezer()
        path.write_text(thawed)

    def frozen(self) -> bool:
        path, _, _ = self._freezer()
        if self.version == 1:
            return path.read_text().strip() == "FROZEN"
        return "frozen 1" in (path.parent / "cgroup.events").read_text().splitlines()

    def limits(self) -> tuple[float, int]:
        """(cores, memory bytes) as the kernel holds them."""
        if self.version == 1:
            cpu, memory = self.paths[:2]
            quota = int((cpu / "cpu.cfs_quota_us").read_text())
            period = int((cpu / "cpu.cfs_period_us").read_text())
            return quota / period, int((memory / "memory.limit_in_bytes").read_text())
        (path,) = self.paths
        quota_us, period_us = (path / "cpu.max").read_text().split()
        return int(quota_us) / int(period_us), int((path / "memory.max").read_text())

    def throttled_s(self) -> float:
        """How long the kernel has held the task's processes back for their CPU quota (`cpu.stat`: v1
        `throttled_time` in ns, v2 `throttled_usec`). Where compute is emulated by waiting, the quota holds
        back only the task process's own work (reading, pacing, fetching), which the modelled task does not
        have: time lost there is the emulation's, not the policy's."""
        stat = dict(line.split() for line in (self.paths[0] / "cpu.stat").read_text().splitlines() if line)
        if self.version == 1:
            return int(stat["throttled_time"]) / 1e9
        return int(stat["throttled_usec"]) / 1e6

    @property
    def procs_files(self) -> list[Path]:
        """Where a process joins the cgroup (by writing its pid), one per hierarchy."""
        return [path / "cgroup.procs" for path in self.paths]

    def join_self(self) -> None:
        """For a subprocess preexec_fn: the task joins its cgroup before it executes anything."""
        join_cgroup(self.procs_files, os.getpid())

    def pids(self) -> list[int]:
        return CgroupTree(self.paths[0]).pids()  # every hierarchy holds the same processes

    def remove(self) -> None:
        """End whatever still runs in it (thawed first, if suspended), then remove the directories."""
        for path in self.paths:
            CgroupTree(path).thaw_all()
        CgroupTree(self.paths[0]).kill_all(grace_s=0)
        for path in self.paths:
            for _ in range(50):  # the kernel releases a cgroup shortly after its last process is reaped
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
