"""Per-task cgroups with a CPU quota and a memory limit, on cgroup v1 (cpu + memory hierarchies) or v2.

A run owns one task root per hierarchy (`<hierarchy>/hybridbed/<run-id>-tasks`), created by the
orchestrator and recorded in the run's manifest, so cleanup finds every task cgroup below it. A worker
creates one cgroup per task attempt under those roots and removes it when the task ends.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from hybridbed.testbed.isolation import CGROUP_GROUP, CGROUP_ROOT, RunCgroup

CFS_PERIOD_US = 100_000


@dataclass(frozen=True)
class CgroupLayout:
    """Where task cgroups go: v1 has separate cpu and memory trees, v2 one tree with both controllers."""
    version: int
    hierarchies: tuple[Path, ...]

    @classmethod
    def detect(cls, root: Path = CGROUP_ROOT) -> "CgroupLayout":
        if (root / "cpu" / "cgroup.procs").exists() and (root / "memory" / "cgroup.procs").exists():
            return cls(1, (root / "cpu", root / "memory"))
        controllers = (root / "cgroup.controllers")
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
        quota = max(1000, int(cores * CFS_PERIOD_US))
        limit = int(memory_mb * 1024 * 1024)
        for path in self.paths:
            path.mkdir()
        if self.version == 1:
            cpu, memory = self.paths
            (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
            (cpu / "cpu.cfs_quota_us").write_text(str(quota))
            (memory / "memory.limit_in_bytes").write_text(str(limit))
        else:
            (path,) = self.paths
            (path / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")
            (path / "memory.max").write_text(str(limit))

    def limits(self) -> tuple[float, int]:
        """(cores, memory bytes) as the kernel holds them."""
        if self.version == 1:
            cpu, memory = self.paths
            quota = int((cpu / "cpu.cfs_quota_us").read_text())
            period = int((cpu / "cpu.cfs_period_us").read_text())
            return quota / period, int((memory / "memory.limit_in_bytes").read_text())
        (path,) = self.paths
        quota, period = (path / "cpu.max").read_text().split()
        return int(quota) / int(period), int((path / "memory.max").read_text())

    def join_self(self) -> None:
        """For a subprocess preexec_fn: the task joins its cgroup before it executes anything."""
        for path in self.paths:
            (path / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        return RunCgroup(self.paths[0]).pids()  # every hierarchy holds the same processes

    def remove(self) -> None:
        """End whatever still runs in it, then remove the directories."""
        RunCgroup(self.paths[0]).kill_all(grace_s=0)
        for path in self.paths:
            for _ in range(50):  # the kernel releases a cgroup shortly after its last process is reaped
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
