"""Starting task processes: forked from a launcher process that has imported the task code already.

A task started as `python -m hybridbed.workers.task` spends some 65 ms of CPU starting the interpreter and
importing, before it does anything the model times. On a 2-core machine a wave of launches queues for that
CPU: 56 processes started at once took 1.9 s at the median to start and end (forked: 0.21 s;
`bench/task_start.py`), and an emulated map took up to 2.2 s longer than the same map simulated
(docs/reproductions.md, DAGPS). Each agent therefore starts one launcher (`python -m
hybridbed.workers.launcher FD`) that imports the task code once and forks a child per task: the child joins
the task's cgroup, takes the three stream ends it was sent as its stdin, stdout and stderr, and runs
`task.main`. The launcher reports each child's pid when it is forked and its exit code when it ends. It exits
when its agent closes the control socket; children it forked run on.

The control socket carries JSON lines: to the launcher `{"cgroup_procs": [...]}` with three file
descriptors (SCM_RIGHTS); from it `{"ready": pid}` once, then `{"started": pid}` per request and
`{"exited": pid, "code": c}` (c as Popen's returncode: negative for a signal).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from hybridbed.workers.cgroups import join_cgroup

READY_TIMEOUT_S = 30.0  # the launcher imports the task code before it answers; far above its 0.1 s
ERROR_TAIL_CHARS = 2000  # of a task's stderr, what a failed task's report carries


class LaunchError(RuntimeError):
    """The launcher did not start a task (it is gone, or did not answer)."""


class TaskProcess:
    """One task process the launcher forked: its stdin and stdout, as Popen's with text=True, and its end.
    Its stderr is read as it comes (a task that wrote more than a pipe holds, 64 KB, before its stdout
    ended would otherwise block), keeping the last ERROR_TAIL_CHARS."""

    def __init__(self, pid: int, stdin: IO[str], stdout: IO[str], stderr: IO[str], launcher: TaskLauncher):
        self.pid = pid
        self.stdin, self.stdout = stdin, stdout
        self._launcher = launcher
        self._error = ""
        self._error_reader = threading.Thread(target=self._read_error, args=(stderr,), daemon=True)
        self._error_reader.start()

    def error(self) -> str:
        """The end of what it wrote to stderr, once it (and whatever holds its stderr) has ended."""
        self._error_reader.join()
        return self._error

    def _read_error(self, stderr: IO[str]) -> None:
        with stderr:
            while chunk := stderr.read(4096):
                self._error = (self._error + chunk)[-ERROR_TAIL_CHARS:]

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> int:
        """Its exit code once it has ended (negative: the signal that ended it); -SIGKILL if the launcher is
        gone and cannot tell."""
        return self._launcher.exit_code(self.pid)


class TaskLauncher:
    """The agent's side: starts the launcher process and asks it for task processes (one at a time)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "hybridbed.workers.launcher", str(theirs.fileno())], pass_fds=[theirs.fileno()]
        )
        theirs.close()
        self._control = ours
        self._requests = threading.Lock()
        self._replies = ours.makefile("r", encoding="utf-8")
        self._changed = threading.Condition()
        self._ready = False
        self._started: list[int] = []
        self._exited: dict[int, int] = {}
        self._gone = False
        threading.Thread(target=self._read, daemon=True, name="launcher-replies").start()
        self._wait_for(lambda: self._ready or self._gone, "to start")
        if self._gone:
            raise LaunchError("the task launcher exited as it started")

    @property
    def pid(self) -> int:
        return self._process.pid

    def start(self, cgroup_procs: list[Path]) -> TaskProcess:
        """A new task process in the cgroup whose `cgroup.procs` files are given, with pipes for its streams."""
        pipes = [os.pipe() for _ in range(3)]
        child_ends = [pipes[0][0], pipes[1][1], pipes[2][1]]  # it reads stdin, writes stdout and stderr
        try:
            with self._requests:
                request = json.dumps({"cgroup_procs": [str(p) for p in cgroup_procs]}) + "\n"
                try:
                    socket.send_fds(self._control, [request.encode()], child_ends)
                except OSError as err:
                    raise LaunchError(f"the task launcher is gone: {err}") from err
                self._wait_for(lambda: self._started or self._gone, "to fork a task")
                if not self._started:
                    raise LaunchError("the task launcher exited")
                pid = self._started.pop()
        except BaseException:
            for fd in (pipes[0][1], pipes[1][0], pipes[2][0]):
                os.close(fd)
            raise
        finally:
            for fd in child_ends:
                os.close(fd)
        return TaskProcess(
            pid,
            os.fdopen(pipes[0][1], "w", encoding="utf-8"),
            os.fdopen(pipes[1][0], "r", encoding="utf-8"),
            os.fdopen(pipes[2][0], "r", encoding="utf-8"),
            self,
        )

    def exit_code(self, pid: int) -> int:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exited or self._gone)
            return self._exited.pop(pid, -signal.SIGKILL)

    def close(self) -> None:
        """Stop the launcher (the tasks it forked are the agent's to end)."""
        with contextlib.suppress(OSError):
            self._control.shutdown(socket.SHUT_RDWR)  # its EOF, whatever still holds the socket here
        self._control.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _wait_for(self, ready: Callable[[], object], what: str) -> None:
        with self._changed:
            if not self._changed.wait_for(ready, timeout=READY_TIMEOUT_S):
                raise LaunchError(f"the task launcher took over {READY_TIMEOUT_S:g} s {what}")

    def _read(self) -> None:
        try:
            for line in self._replies:
                reply = json.loads(line)
                with self._changed:
                    if "ready" in reply:
                        self._ready = True
                    elif "started" in reply:
                        self._started.append(reply["started"])
                    else:
                        self._exited[reply["exited"]] = reply["code"]
                    self._changed.notify_all()
        except (OSError, ValueError):
            pass
        with self._changed:
            self._gone = True
            self._changed.notify_all()


def serve(control: socket.socket) -> None:
    """The launcher's loop: fork a task per request, report pids and exit codes, until the agent closes."""
    import hybridbed.workers.task  # noqa: F401 (imported once here, so that every child has it)

    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.set_wakeup_fd(wakeup_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd hears of it
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wakeup_r, selectors.EVENT_READ)
    reply = control.makefile("w", encoding="utf-8")

    def send(message: dict) -> None:
        reply.write(json.dumps(message) + "\n")
        reply.flush()

    send({"ready": os.getpid()})
    while True:
        for key, _ in selector.select():
            if key.fileobj is control:
                data, fds, _flags, _addr = socket.recv_fds(control, 4096, 3)
                if not data:
                    return
                request = json.loads(data)  # whole: the agent sends one at a time, each in one send
                pid = os.fork()
                if pid == 0:
                    _become_task(request["cgroup_procs"], fds, selector, control, (wakeup_r, wakeup_w))
                for fd in fds:
                    os.close(fd)
                send({"started": pid})
            else:
                os.read(wakeup_r, 4096)
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                send({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _become_task(
    cgroup_procs: list[str],
    fds: list[int],
    selector: selectors.BaseSelector,
    control: socket.socket,
    wakeup: tuple[int, int],
) -> None:
    """In the forked child: let go of the launcher's selector, control socket (the agent's EOF is the
    launcher's alone) and signal wakeup, join the task's cgroup, take the sent streams as stdin, stdout and
    stderr, run the task and exit with its code; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        selector.close()
        for fd in (control.detach(), *wakeup):
            os.close(fd)
        join_cgroup([Path(procs) for procs in cgroup_procs], os.getpid())
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 3) for fd in fds]  # none of them on 0-2 while those are set
        for fd in fds:
            os.close(fd)
        for target, fd in enumerate(high):
            os.dup2(fd, target)
            os.close(fd)
        from hybridbed.workers import task

        code = task.main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):
                stream.flush()
        os._exit(code)


def main() -> int:
    serve(socket.socket(fileno=int(sys.argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
