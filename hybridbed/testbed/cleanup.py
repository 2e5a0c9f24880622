"""Removing exactly what a run created, from its manifest: processes (by cgroup and recorded pid),
the fabric namespace with every interface in it, the run's cgroup and its state directory.

Nothing is found by name or pattern, so other people's networks, bridges and processes are never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from hybridbed.testbed.isolation import FabricNamespace
from hybridbed.testbed.runs import RunManifest, recorded_runs
from hybridbed.workers.cgroups import CgroupTree


class RunStillActive(RuntimeError):
    """The run's own process is still alive; cleaning under it needs an explicit force."""


def clean_run(manifest: RunManifest) -> list[str]:
    """Remove everything the manifest records. Safe to call again on a half-cleaned run. Returns what it did."""
    done = []
    for path in manifest.cgroups:  # first thaw every suspended task, in whichever hierarchy froze it
        CgroupTree(Path(path)).thaw_all()
    for path in manifest.cgroups:
        cgroup = CgroupTree(Path(path))
        if cgroup.pids():
            done.append(f"ended {len(cgroup.pids())} process(es) of cgroup {path}")
            cgroup.kill_all()
    for proc in manifest.processes:
        if proc.is_alive():  # recorded outside the cgroup (should not happen); still ours by pid + start time
            os.kill(proc.pid, signal.SIGKILL)
            done.append(f"killed {proc.role} (pid {proc.pid})")
    namespace_left = False
    if manifest.netns:
        namespace = FabricNamespace(manifest.netns)
        if namespace.exists():
            try:
                namespace.delete()
                done.append(f"deleted network namespace {manifest.netns} (its bridges and veths with it)")
            except RuntimeError as err:  # keep the run recorded, so that `hybridbed clean` can try again
                namespace_left = True
                done.append(f"{err}; the run stays recorded in {manifest.state_dir}")
    for path in manifest.cgroups:
        if Path(path).exists():
            CgroupTree(Path(path)).remove()
            done.append(f"removed cgroup {path}")
    if Path(manifest.state_dir).exists() and not namespace_left:
        shutil.rmtree(manifest.state_dir)
        done.append(f"removed {manifest.state_dir}")
    return done


def clean(run_id: str | None = None, force: bool = False) -> dict[str, list[str]]:
    """Clean one run (by id), or every run whose owning process is gone. Returns actions per run id."""
    runs = recorded_runs()
    if run_id is not None:
        runs = [m for m in runs if m.run_id == run_id]
        if not runs:
            known = ", ".join(m.run_id for m in recorded_runs()) or "none"
            raise KeyError(f"no run {run_id!r} is recorded (recorded runs: {known})")
        if runs[0].owner_alive() and not force:
            raise RunStillActive(f"run {run_id} is still running (pid {runs[0].owner_pid}); stop it, or use --force")
    else:
        runs = [m for m in runs if not m.owner_alive()]
    return {m.run_id: clean_run(m) for m in runs}
