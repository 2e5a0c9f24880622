"""How long a wave of task processes takes to start: each started as its own interpreter
(`python -m hybridbed.workers.task`, as the worker agent once did) against forked by the task launcher
(`hybridbed/workers/launcher.py`, as it does now). Every process is sent an empty description at once and
fails on it, so a process's time is its start-up and the same few milliseconds of failing; the table gives,
per wave size, when the processes were seen ended (waited for in the order they started: the median and the
last, seconds after the wave began), and the ratio of the two ways.
An emulated map loses this time against the simulator (docs/reproductions.md, DAGPS). No root needed:
    .venv/bin/python bench/task_start.py [--waves 1,8,28,56] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from hybridbed.workers.launcher import TaskLauncher, TaskProcess


def fresh() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hybridbed.workers.task"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def wave(start: Callable[[], subprocess.Popen | TaskProcess], size: int) -> tuple[float, float]:
    """Start `size` processes at once; when they were seen ended (the median and the last), seconds after the
    first start."""
    began = time.monotonic()
    procs = [start() for _ in range(size)]
    ends = []
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
    for proc in procs:
        proc.wait()
        ends.append(time.monotonic() - began)
    return statistics.median(ends), max(ends)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--waves", default="1,8,28,56", help="comma-separated wave sizes")
    parser.add_argument("--repeats", type=int, default=3, help="waves per size and way (the median is shown)")
    args = parser.parse_args()
    launcher = TaskLauncher()
    table = Table(title="task start-up: a wave of task processes, seconds from the wave's start")
    for column in ("processes", "own interpreter: median / last", "launcher: median / last", "ratio (median)"):
        table.add_column(column, justify="right")
    try:
        for size in (int(s) for s in args.waves.split(",")):
            own, forked = [], []
            for _ in range(args.repeats):  # alternated, so that a noisy moment hits both
                own.append(wave(fresh, size))
                forked.append(wave(lambda: launcher.start([]), size))
            own_median, own_last = (statistics.median(x) for x in zip(*own, strict=True))
            fork_median, fork_last = (statistics.median(x) for x in zip(*forked, strict=True))
            table.add_row(
                str(size),
                f"{own_median:.3f} / {own_last:.3f}",
                f"{fork_median:.3f} / {fork_last:.3f}",
                f"{own_median / fork_median:.1f}x",
            )
    finally:
        launcher.close()
    Console().print(table)


if __name__ == "__main__":
    main()
