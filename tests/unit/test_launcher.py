"""The task launcher: task processes forked from a process that has the task code imported, with the streams,
cgroup and exit codes a task started on its own would have."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import psutil
import pytest

from hybridbed.workers.launcher import ERROR_TAIL_CHARS, LaunchError, TaskLauncher, TaskProcess


@pytest.fixture
def launcher():
    launcher = TaskLauncher()
    yield launcher
    launcher.close()


def map_task(tmp_path: Path) -> dict:
    """A map of a 1000-byte local block writing one 500-byte partition, unpaced, computing 0.1 s by waiting."""
    (tmp_path / "blocks").mkdir()
    (tmp_path / "blocks" / "b0").write_bytes(b"x" * 1000)
    return {
        "task_id": "j-m0",
        "attempt": 0,
        "kind": "map",
        "cores": 1.0,
        "compute_s": 0.1,
        "compute_mode": "sleep",
        "data_dir": str(tmp_path),
        "input": {"path": "blocks/b0", "sources": []},
        "partitions": [["j-r0", 500]],
        "output_bytes": 0,
        "output_dir": "out/j-m0",
        "disk_read_bps": None,
        "disk_write_bps": None,
        "rate_bps": None,
    }


def test_a_forked_task_runs_in_the_cgroup_it_was_given_and_reports_as_it_would_alone(launcher, tmp_path):
    procs = tmp_path / "cgroup.procs"  # a plain file stands in for the cgroup's: the child writes its pid
    procs.touch()
    task = launcher.start([procs])
    assert psutil.Process(task.pid).ppid() == launcher.pid  # forked there, not started from here
    task.stdin.write(json.dumps(map_task(tmp_path)) + "\n")
    task.stdin.flush()
    records = []
    for line in task.stdout:
        record = json.loads(line)
        records.append(record)
        if record["event"] == "using" and record["active"]:  # the agent's answer: unpaced
            task.stdin.write(json.dumps({"given": {record["resource"]: None}}) + "\n")
            task.stdin.flush()
    assert task.wait() == 0
    assert procs.read_text() == str(task.pid)
    done = records[-1]
    cpu_s = done.pop("cpu_s")
    assert done == {"event": "done", "read_local_bytes": 1000, "read_remote_bytes": 0, "written_bytes": 500}
    # its own CPU time, from the fork on: not the launcher's start (the interpreter and the imports, some 65 ms)
    assert 0 < cpu_s < 0.05
    assert (tmp_path / "out" / "j-m0" / "j-r0").stat().st_size == 500


def test_a_failing_task_gives_its_exit_code_and_its_error_on_stderr(launcher):
    task = launcher.start([])
    task.stdin.write("not a task\n")
    task.stdin.flush()
    assert task.wait() == 1
    assert "JSONDecodeError" in task.error()


def test_a_task_writing_more_to_stderr_than_a_pipe_holds_is_not_blocked_and_its_tail_is_kept(launcher):
    pipes = [os.pipe() for _ in range(3)]
    task = TaskProcess(
        0,
        os.fdopen(pipes[0][1], "w"),
        os.fdopen(pipes[1][0], "r"),
        os.fdopen(pipes[2][0], "r"),
        launcher,
    )
    written = "".join(f"line {i}\n" for i in range(40_000))  # about 350 KB, over a pipe's 64 KB

    def the_task() -> None:  # what a task does: its stderr first, then its last record on stdout
        with os.fdopen(pipes[2][1], "w") as stderr, os.fdopen(pipes[1][1], "w") as stdout:
            stderr.write(written)
            stdout.write("done\n")

    writer = threading.Thread(target=the_task, daemon=True)
    writer.start()
    writer.join(timeout=10)
    assert not writer.is_alive(), "the task blocked on a full stderr pipe"
    assert task.stdout.read() == "done\n"
    assert task.error() == written[-ERROR_TAIL_CHARS:]
    task.stdin.close()
    os.close(pipes[0][0])


def test_a_killed_task_reports_the_signal_and_the_launcher_goes_on(launcher):
    task = launcher.start([])  # it waits for its description on stdin
    task.kill()
    assert task.wait() == -signal.SIGKILL
    task.kill()  # already gone: nothing to do
    again = launcher.start([])
    again.stdin.write("\n")
    again.stdin.flush()
    assert again.wait() == 1


def test_tasks_started_together_are_told_apart_by_their_exit_codes(launcher):
    tasks = [launcher.start([]) for _ in range(20)]
    for task in tasks[:10]:
        task.kill()
    for task in tasks[10:]:
        task.stdin.write("\n")
        task.stdin.flush()
    assert [task.wait() for task in tasks] == [-signal.SIGKILL] * 10 + [1] * 10
    assert len({task.pid for task in tasks}) == 20


def test_the_launcher_ends_when_its_agent_closes_and_then_refuses_to_start_tasks():
    launcher = TaskLauncher()
    server = psutil.Process(launcher.pid)
    launcher.close()
    assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE
    with pytest.raises(LaunchError):
        launcher.start([])
