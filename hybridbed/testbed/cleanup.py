"""Removing exactly what a run created, from its manifest: processes (by cgroup and recorded pid),
the fabric namespace with every interface in it, the run's cgroup and its state directory, and, through
`hybridbed clean` over ssh, its parts on further servers.

Nothing is found by name or pattern, so other people's networks, bridges and processes are never touched.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

from hybridbed.config.servers import ServerSpec
from hybridbed.testbed.isolation import FabricNamespace
from hybridbed.testbed.runs import RunManifest, recorded_runs
from hybridbed.testbed.ssh import ssh_command
from hybridbed.workers.cgroups import CgroupTree

REMOTE_CLEAN_TIMEOUT_S = 30.0


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
    done += [_clean_remote_part(part) for part in manifest.remote_parts]
    if Path(manifest.state_dir).exists() and not namespace_left:
        _remove_tree(Path(manifest.state_dir))
        done.append(f"removed {manifest.state_dir}")
    return done


def _remove_tree(path: Path) -> None:
    """Remove the directory tree. An entry that another cleanup of the same run (`hybridbed clean --force`, the
    watchdog) removed first is gone, as wanted: the removal starts again over what is left, which ends, as
    entries only go; any other error stands. (Catching the error rather than handing rmtree a handler keeps
    one way on every Python: the handler's keyword is `onerror` before 3.12 and `onexc` from it.)"""
    while path.exists():
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(path)


def _clean_remote_part(part: dict) -> str:
    """`hybridbed clean` for the run's part on a further server, over ssh; what that server answered. Its
    ssh session is gone by now (the run's processes are), so the part is removing itself or has done so."""
    spec = ServerSpec.model_validate(part["server"])
    command = shlex.join([spec.interpreter, "-m", "hybridbed.cli", "clean", part["run_id"]])
    try:
        result = subprocess.run(
            [*ssh_command(spec, part["address"]), command],
            capture_output=True,
            text=True,
            timeout=REMOTE_CLEAN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"server {spec.host}: no answer within {REMOTE_CLEAN_TIMEOUT_S:g} s; run `{command}` there"
    answer = " ".join((result.stdout + result.stderr).split()) or f"exit status {result.returncode}"
    return f"server {spec.host}, part {part['run_id']}: {answer}"


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
