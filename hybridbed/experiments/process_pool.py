"""A local pool of worker processes for simulated runs, which share nothing and so run side by side: a sweep's
points and a comparison's setups. An emulated run needs the machine's CPUs and builds its network here, so
emulated runs never go on a pool (`check_workers`).

Stopping: Ctrl-C or SIGTERM reaches the pool's owner, which stops every run under way at once, as a run in its
own process stops (its partial results written, marked interrupted), and waits for them. The workers ignore a
terminal's Ctrl-C, which reaches the whole process group, and stop on the owner's SIGUSR1 instead, so each run
is interrupted once; a worker between runs starts none after it (the pool hands a worker its next run before
the last ends, and such a run cannot be cancelled)."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from hybridbed.config.validation import SpecError
from hybridbed.testbed.interrupts import note_stop, stop_asked

STOP_SIGNAL = signal.SIGUSR1
_in_run = False  # in a worker: a run is under way (what STOP_SIGNAL interrupts)
Key = TypeVar("Key")
POOL_WORKER_LOST: tuple[type[BaseException], ...] = (BrokenProcessPool,)  # how a pool's future tells its worker died


@dataclass(frozen=True)
class WorkerLost:
    """A run whose worker process (or Dask worker) died under it: that run failed, the others go on."""

    error: BaseException

    @property
    def status(self) -> str:
        return f"failed: worker lost: {type(self.error).__name__}: {self.error}"


def check_workers(workers: int, backend: str) -> None:
    """Refuse a worker count the backend cannot use, naming the option."""
    if workers < 1:
        raise SpecError(f"--workers: at least 1 (got {workers})")
    if backend == "emulation" and workers > 1:
        raise SpecError(
            "--workers: emulated runs go one at a time on this machine (each emulation needs its CPUs and builds "
            "its network here); use the simulation backend to run several at once"
        )


def default_workers(backend: str) -> int:
    """One simulated run per CPU; emulated runs one at a time."""
    return 1 if backend == "emulation" else os.cpu_count() or 1


class _RunPool(ProcessPoolExecutor):
    """A process pool whose submitted calls are runs that its owner can interrupt (`interrupt_runs`)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return super().submit(_as_run, fn, *args, **kwargs)

    def interrupt_runs(self) -> None:
        """Send every worker process this pool started (by pid) the stop signal."""
        for pid, process in list((self._processes or {}).items()):  # the executor's own record of its processes
            if process.is_alive():
                os.kill(pid, STOP_SIGNAL)


def as_runs_end(
    futures: dict[Future, Key],
    lost: tuple[type[BaseException], ...],
    while_waiting: Callable[[Collection[Key]], None] | None = None,
    poll_s: float = 0.5,
) -> Iterator[tuple[Key, Any]]:
    """Each submitted run's key and result as the run ends, in any order; `WorkerLost` as the result of a run
    whose future raised one of the `lost` errors (an error raised by the run itself propagates, as it would
    with the runs one after another). `while_waiting` is told the keys still under way every `poll_s`."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=poll_s if while_waiting else None, return_when=FIRST_COMPLETED)
        if while_waiting and pending:
            while_waiting([futures[future] for future in pending])
        for future in done:
            try:
                result = future.result()
            except lost as err:
                result = WorkerLost(err)
            yield futures[future], result


@contextmanager
def process_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """`workers` processes; on an error or an interrupt the runs under way are stopped (each writes its partial
    results), those not started are cancelled, and the pool waits for its workers to end."""
    # spawn: a forked child would inherit this process's threads (the progress display) mid-state
    context = multiprocessing.get_context("spawn")
    with _RunPool(max_workers=workers, mp_context=context, initializer=_worker_signals) as pool:
        try:
            yield pool
        except BaseException:
            pool.interrupt_runs()
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _worker_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(STOP_SIGNAL, _stop_run)


def _stop_run(signum: int, frame: object) -> None:
    note_stop()  # a run handed to this worker after now does not start
    if _in_run:
        raise KeyboardInterrupt


def _as_run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    global _in_run
    if stop_asked():  # handed over before the pool's owner could cancel it
        raise KeyboardInterrupt
    _in_run = True
    try:
        return fn(*args, **kwargs)
    finally:
        _in_run = False
