"""A real disk under 1, 2, 4 and 8 concurrent streams, against hybridbed's host disk model.

Both backends share a host's disk max-min at a fixed bandwidth (`workers/host_share.py`, the simulator's
disk links): n streams get 1/n of it each and the same total whatever n. This measures whether a real disk
does: each stream reads or writes its own file sequentially in 1 MiB blocks with O_DIRECT (the page cache
would measure memory, not the disk), and the bench prints the aggregate rate for every n, its ratio to one
stream's (the model says 1.0) and the spread between streams (the model says equal shares). A ratio well
below 1 (seeks on a spinning disk, as the Tetris paper's over-allocated disks) means the model
flatters over-allocation on such a disk. Run one at a time, on the filesystem hybridbed writes its data to:
    .venv/bin/python bench/disk_contention.py [--dir DIR] [--mb-per-stream 256]
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

BLOCK = 1 << 20
STREAMS = (1, 2, 4, 8)


def _stream(path: Path, blocks: int, write: bool, took: list[float], i: int) -> None:
    buffer = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    buffer.write(bytes(range(256)) * (BLOCK // 256))
    flags = (os.O_WRONLY | os.O_CREAT | os.O_TRUNC if write else os.O_RDONLY) | os.O_DIRECT
    fd = os.open(path, flags, 0o600)
    start = time.perf_counter()
    try:
        for _ in range(blocks):
            done = os.writev(fd, [buffer]) if write else os.readv(fd, [buffer])
            if done != BLOCK:
                raise OSError(f"{path}: a short {'write' if write else 'read'} of {done} bytes")
        if write:
            os.fsync(fd)
    finally:
        os.close(fd)
    took[i] = time.perf_counter() - start


def measure(directory: Path, streams: int, blocks: int, write: bool) -> tuple[float, float]:
    """Aggregate MB/s of `streams` concurrent sequential streams, and the slowest stream's time over the
    fastest's."""
    took = [0.0] * streams
    paths = [directory / f"stream-{i}" for i in range(streams)]
    threads = [threading.Thread(target=_stream, args=(p, blocks, write, took, i)) for i, p in enumerate(paths)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    return streams * blocks * BLOCK / 1e6 / wall, max(took) / min(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="a directory on the disk to measure")
    parser.add_argument("--mb-per-stream", type=int, default=256, help="MiB each stream moves")
    args = parser.parse_args()
    blocks = args.mb_per_stream  # of 1 MiB
    table = Table("direction", "streams", "aggregate MB/s", "vs 1 stream (model 1.00)", "slowest / fastest stream")
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="hybridbed-disk-") as tmp:
        for write in (True, False):  # the reads read back what the widest write wrote
            alone = 0.0
            for n in STREAMS:
                rate, spread = measure(Path(tmp), n, blocks, write)
                alone = alone or rate
                table.add_row(
                    "write" if write else "read", str(n), f"{rate:.0f}", f"{rate / alone:.2f}", f"{spread:.2f}"
                )
    Console().print(table)


if __name__ == "__main__":
    main()
