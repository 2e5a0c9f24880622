"""Periodic plans off the decision path: the simulator's solver hands a plan over at the request's time plus
the solve's wall time, the emulated scheduler's lets decisions go on while a worker process solves, and DSP
decides with the plan in force until its period's MILP plan is taken."""

from __future__ import annotations

import operator
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import psutil
import pytest

from hybridbed.policies.dsp import DspPolicy
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.model import JobSpec, Resources, build_job
from hybridbed.scheduler.plan_solver import ChargedSolver, PlanSolver, ProcessSolver, Solved


def slow(value: str, seconds: float):
    def solve() -> str:
        time.sleep(seconds)
        return value

    return solve


def test_the_simulators_solver_charges_the_solves_wall_time_on_the_simulated_clock():
    solver = ChargedSolver()
    solver.submit(100.0, slow("plan", 0.05))
    assert solver.busy
    assert solver.take(100.0) is None and solver.take(100.04) is None  # a planner would still be at it
    solved = solver.take(100.2)
    assert solved is not None and solved.value == "plan" and solved.requested_s == 100.0
    assert 0.05 <= solved.wall_s < 0.2
    assert not solver.busy and solver.take(200.0) is None  # taken once


def slow_plan(value: str, seconds: float) -> str:
    """A solve for the worker process (module level, so it pickles)."""
    time.sleep(seconds)
    return value


def test_the_emulated_schedulers_solver_leaves_the_decisions_free_while_it_solves():
    solver = ProcessSolver()
    asked = time.perf_counter()
    solver.submit(5.0, partial(slow_plan, "plan", 1.0))
    assert time.perf_counter() - asked < 0.5  # the caller does not wait for the solve
    assert solver.take(1e9) is None and solver.busy  # not done: nothing to take, whatever the clock says
    with pytest.raises(RuntimeError):
        solver.submit(6.0, partial(slow_plan, "another", 0.0))  # one plan under way at a time
    deadline = time.monotonic() + 30
    while (solved := solver.take(7.0)) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert solved is not None and solved.value == "plan" and solved.requested_s == 5.0
    assert 1.0 <= solved.wall_s < 5.0
    solver.close()


def test_a_failed_solve_is_reported_where_the_plan_is_taken():
    solver = ProcessSolver()
    solver.submit(0.0, partial(operator.truediv, 1, 0))
    deadline = time.monotonic() + 30
    with pytest.raises(ZeroDivisionError):
        while solver.take(0.0) is None and time.monotonic() < deadline:
            time.sleep(0.01)
    solver.close()


def test_closing_ends_the_worker_process_and_a_solve_under_way():
    before = {c.pid for c in psutil.Process().children()}
    solver = ProcessSolver()
    solver.submit(0.0, partial(slow_plan, "plan", 60.0))
    (worker,) = [
        c
        for c in psutil.Process().children()
        if c.pid not in before and "resource_tracker" not in " ".join(c.cmdline())
    ]
    solver.close()
    assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
    assert not solver.busy


class HeldSolver(PlanSolver):
    """Solves when the test says so: until then, a plan is under way."""

    def __init__(self) -> None:
        self.solve: Callable[[], Any] | None = None
        self.requested_s = 0.0
        self.released = False

    @property
    def busy(self) -> bool:
        return self.solve is not None

    def submit(self, now: float, solve: Callable[[], Any]) -> None:
        self.solve, self.requested_s = solve, now

    def take(self, now: float) -> Solved | None:
        if self.solve is None or not self.released:
            return None
        solved, self.solve = Solved(self.solve(), self.requested_s, 0.0), None
        return solved


def test_dsp_decides_with_the_plan_in_force_while_its_milp_plan_is_solved():
    """A period's MILP plan that takes as long as the test wants: DSP's decisions go on with the list plan
    made at the job's arrival, and the MILP plan is taken at the first decision after it is done (plan.csv's
    row says when it was asked for and when taken)."""
    hosts = {f"h{i}": HostState(f"h{i}", 0, 2, Resources(2, 1024)) for i in range(2)}
    cluster = ClusterState(1, hosts, 1.0)
    policy = DspPolicy(milp_time_limit_s=1.0)
    policy.plan_solver = solver = HeldSolver()
    core = SchedulerCore(policy, cluster, random.Random(1))
    core.submit(build_job(JobSpec("j", 0.0, 100, 0, 0, 6, 0, 4.0, 0.0), Resources(1, 256)), 0.0)
    core.act(0.0)
    assert len(core.schedule(0.0)) == 4 and solver.busy  # the list plan's tasks went out
    core.act(0.3)
    assert policy.plan_rows() == []
    solver.released = True
    core.act(0.5)
    (row,) = policy.plan_rows()
    assert row["time_s"] == 0.0 and row["taken_s"] == 0.5 and row["tasks"] == 6
    assert not solver.busy


def test_the_worker_ends_with_a_scheduler_killed_outright(tmp_path):
    """SIGKILL leaves the scheduler no time to close its solver: the worker, mid-solve, must end with it."""
    script = tmp_path / "scheduler.py"
    script.write_text(
        "import time\nfrom functools import partial\nimport psutil\n"
        "from hybridbed.scheduler.plan_solver import ProcessSolver\n"
        "if __name__ == '__main__':\n"
        "    solver = ProcessSolver()\n"
        "    solver.submit(0.0, partial(time.sleep, 60))\n"
        "    while not [c for c in psutil.Process().children() if 'resource_tracker' not in ' '.join(c.cmdline())]:\n"
        "        time.sleep(0.05)\n"
        "    print('solving', flush=True)\n"
        "    time.sleep(60)\n"
    )
    scheduler = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    workers: list[psutil.Process] = []
    try:
        assert scheduler.stdout is not None and scheduler.stdout.readline().strip() == "solving"
        workers = [
            c for c in psutil.Process(scheduler.pid).children() if "resource_tracker" not in " ".join(c.cmdline())
        ]
        assert workers
        scheduler.send_signal(signal.SIGKILL)
        scheduler.wait()
        _, alive = psutil.wait_procs(workers, timeout=5)
        assert not alive
    finally:  # what this test started, by pid, whatever happened
        scheduler.kill()
        for worker in workers:
            if worker.is_running():
                worker.kill()
