"""A task's cgroup on the real kernel: frozen, it stops where it is; thawed, it goes on from there; its CPU
quota can change while it runs; and cleanup ends it even while it is frozen."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from hybridbed.testbed.cleanup import clean_run
from hybridbed.testbed.runs import RunManifest
from hybridbed.workers.cgroups import CgroupLayout, CgroupTree, TaskCgroup

COUNTER = """import os, sys
i = 0
while True:
    i += 1
    if i % 20000 == 0:  # written whole: a freeze may come at any instruction
        open(sys.argv[1] + ".tmp", "w").write(str(i))
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
"""


@pytest.fixture
def task_roots():
    layout = CgroupLayout.detect()
    roots = layout.create_task_roots(f"it-cgroups-{os.getpid()}")
    yield layout, roots
    for root in roots:  # whatever a test left: thawed first, then ended and removed
        CgroupTree(root).thaw_all()
    for root in roots:
        CgroupTree(root).kill_all(grace_s=0)
        CgroupTree(root).remove()
        assert not root.exists()


def counting_task(cgroup: TaskCgroup, out: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", COUNTER, str(out)], preexec_fn=cgroup.join_self)
    deadline = time.monotonic() + 10
    while not out.exists():
        assert time.monotonic() < deadline, "the task never counted"
        time.sleep(0.01)
    return proc


def count(out: Path) -> int:
    return int(out.read_text())


def counting_in_cgroup(task_roots, key: str, out: Path) -> tuple[TaskCgroup, subprocess.Popen]:
    """A fresh one-core task cgroup with the counting task running in it."""
    layout, roots = task_roots
    cgroup = TaskCgroup(roots, layout.version, key)
    cgroup.create(cores=1.0, memory_mb=256)
    return cgroup, counting_task(cgroup, out)


def test_a_frozen_task_stops_where_it_is_and_resumes_from_there(tmp_path, task_roots):
    cgroup, proc = counting_in_cgroup(task_roots, "t0", tmp_path / "count")
    time.sleep(0.3)
    cgroup.freeze()
    assert cgroup.frozen()
    cpu = psutil.Process(proc.pid).cpu_times()
    at_freeze = count(tmp_path / "count")
    time.sleep(0.5)
    assert count(tmp_path / "count") == at_freeze  # no progress while frozen
    assert psutil.Process(proc.pid).cpu_times().user == pytest.approx(cpu.user, abs=0.02)
    cgroup.thaw()
    assert not cgroup.frozen()
    time.sleep(0.3)
    assert count(tmp_path / "count") > at_freeze and proc.poll() is None  # the same process, further on
    cgroup.freeze()
    cgroup.remove()  # ends a frozen task: thawed first, else SIGKILL would wait
    assert proc.wait(timeout=5) != 0 and not any(p.exists() for p in cgroup.paths)


def test_a_running_task_gets_its_new_cpu_quota(tmp_path, task_roots):
    cgroup, proc = counting_in_cgroup(task_roots, "t1", tmp_path / "count")
    cgroup.set_cores(0.2)
    assert cgroup.limits()[0] == pytest.approx(0.2)
    process = psutil.Process(proc.pid)
    before, started, held = sum(process.cpu_times()[:2]), time.monotonic(), cgroup.throttled_s()
    time.sleep(1.0)
    used = (sum(process.cpu_times()[:2]) - before) / (time.monotonic() - started)
    assert used <= 0.3, f"the task used {used:.2f} cores under a 0.2-core quota"
    # a process that wants a whole core is held back most of each period under a fifth of one
    assert cgroup.throttled_s() - held >= 0.2
    cgroup.remove()
    assert proc.wait(timeout=5) != 0


def test_a_runs_cleanup_ends_a_frozen_task(tmp_path, task_roots):
    """clean_run ends processes hierarchy by hierarchy; a task frozen in the freezer hierarchy is thawed
    first, or the SIGKILL sent through the cpu hierarchy would wait forever."""
    layout, roots = task_roots
    cgroup = TaskCgroup(roots, layout.version, "t2")
    cgroup.create(cores=1.0, memory_mb=256)
    proc = counting_task(cgroup, tmp_path / "count")
    cgroup.freeze()
    manifest = RunManifest(
        "it-cgroups", str(tmp_path / "state"), time.time(), os.getpid(), 0.0, cgroups=[str(r) for r in roots]
    )
    done = clean_run(manifest)
    assert proc.wait(timeout=5) != 0
    assert any("ended 1 process" in line for line in done) and not any(r.exists() for r in roots)
