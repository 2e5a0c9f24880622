"""A local pool of worker processes for simulated runs, which share nothing and so run side by side: a sweep's
points and a comparison's setups. An emulated run needs the machine's CPUs and builds its network here, so
emulated runs never go on a pool (`check_workers`)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

from hybridbed.config.validation import SpecError


def check_workers(workers: int, backend: str) -> None:
    """Refuse a worker count the backend cannot use, naming the option."""
    if workers < 1:
        raise SpecError(f"--workers: at least 1 (got {workers})")
    if backend == "emulation" and workers > 1:
        raise SpecError(
            "--workers: emulated runs go one at a time on this machine (each emulation needs its CPUs and builds "
            "its network here); use the simulation backend to run several at once"
        )


@contextmanager
def process_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """`workers` processes; on an error or Ctrl-C the runs not started are cancelled and the pool waits for the
    ones under way (each ends writing its partial results)."""
    # spawn: a forked child would inherit this process's threads (the progress display) mid-state
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            yield pool
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def default_workers(backend: str) -> int:
    """One simulated run per CPU; emulated runs one at a time."""
    return 1 if backend == "emulation" else os.cpu_count() or 1
