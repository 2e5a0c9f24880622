"""Where a policy's periodic plan is solved, so that no heartbeat waits for it: DSP's MILP takes seconds,
where a YARN ResourceManager answers a heartbeat in well under a millisecond (Tetris Table 7: 0.06-0.2 ms).

A policy asks for a plan with `submit` and picks it up with `take` at a later decision; in between it
decides with the plan it has. Both backends hand the plan over when a planner beside the scheduler would
have it: the emulated scheduler solves in a worker process and takes the plan at the first decision after
the solve is done; the simulator, whose clock does not follow the wall's, solves at once and takes the plan
from the simulated time of the request plus the solve's measured wall time.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.pool
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Solved:
    """A finished plan: the solver's value, when it was asked for, and how long it took (wall seconds)."""

    value: Any
    requested_s: float
    wall_s: float


PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends


def _end_with_parent(parent: int) -> None:
    """A solver's worker ends with the scheduler that started it, even one killed outright (else it solves
    on until the MILP's time limit, then fails to send the plan)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the line above
        os._exit(0)


def _timed(solve: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = solve()
    return value, time.perf_counter() - started


class PlanSolver:
    """At most one plan under way at a time."""

    @property
    def busy(self) -> bool:
        raise NotImplementedError

    def submit(self, now: float, solve: Callable[[], Any]) -> None:
        """Ask for the plan `solve` makes, at `now`."""
        if self.busy:
            raise RuntimeError("a plan is already under way")
        self._start(now, solve)

    def _start(self, now: float, solve: Callable[[], Any]) -> None:
        raise NotImplementedError

    def take(self, now: float) -> Solved | None:
        """The plan asked for, once it may be used at `now` (then forgotten), else None."""
        raise NotImplementedError

    def close(self) -> None:
        """Drop a plan still under way (the run is over)."""


class ChargedSolver(PlanSolver):
    """The simulator's: solves at once, usable from the request's simulated time plus the solve's wall time."""

    def __init__(self) -> None:
        self._solved: Solved | None = None

    @property
    def busy(self) -> bool:
        return self._solved is not None

    def _start(self, now: float, solve: Callable[[], Any]) -> None:
        value, wall_s = _timed(solve)
        self._solved = Solved(value, now, wall_s)

    def take(self, now: float) -> Solved | None:
        solved = self._solved
        if solved is None or now < solved.requested_s + solved.wall_s:
            return None
        self._solved = None
        return solved


class ProcessSolver(PlanSolver):
    """The emulated scheduler's: a worker process solves (a thread would take the GIL from the decisions
    while it builds the model); the plan is taken at the first decision after it is done. `solve` must
    pickle (a module-level function, or a partial of one, over plain data)."""

    def __init__(self) -> None:
        self._pool: multiprocessing.pool.Pool | None = None  # started at the first plan (numpy and scipy load)
        self._pending: multiprocessing.pool.AsyncResult | None = None
        self._requested_s = 0.0

    @property
    def busy(self) -> bool:
        return self._pending is not None

    def _start(self, now: float, solve: Callable[[], Any]) -> None:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = context.Pool(1, initializer=_end_with_parent, initargs=(os.getpid(),))
        self._pending, self._requested_s = self._pool.apply_async(_timed, (solve,)), now

    def take(self, now: float) -> Solved | None:
        pending = self._pending
        if pending is None or not pending.ready():
            return None
        self._pending = None
        value, wall_s = pending.get()  # a solver's error surfaces here, on the decision path
        return Solved(value, self._requested_s, wall_s)

    def close(self) -> None:
        """End the worker process, a solve under way too (it is this solver's own child)."""
        self._pending = None
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
