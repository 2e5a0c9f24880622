"""Reader for the SWIM workload format (Chen et al., MASCOTS'11; Facebook FB-2009/FB-2010 samples).

One job per line, six tab-separated columns: job id, submit time (s), gap to the previous job (s),
map input bytes, shuffle bytes, reduce output bytes.
"""
from __future__ import annotations

from pathlib import Path

SWIM_COLUMNS = ("job id", "submit time", "inter-job gap", "map input bytes", "shuffle bytes", "reduce output bytes")


class TraceError(ValueError):
    """A trace line that does not follow the format; the message names the file and line."""


def read_swim(path: Path, limit: int | None = None, min_shuffle_bytes: float = 0) -> list[tuple[str, float, int, int, int]]:
    """(job id, submit time, input, shuffle, output) per job, in file order; at most `limit` jobs, and
    only those shuffling at least `min_shuffle_bytes` (how a study selects its jobs from a sample)."""
    rows = []
    with Path(path).open() as trace:
        for number, line in enumerate(trace, start=1):
            if limit is not None and len(rows) >= limit:
                break
            if not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) != len(SWIM_COLUMNS):
                raise TraceError(f"{path}:{number}: expected {len(SWIM_COLUMNS)} tab-separated columns "
                                 f"({', '.join(SWIM_COLUMNS)}), found {len(fields)}")
            try:
                submit = float(fields[1])
                sizes = [int(f) for f in fields[3:]]
            except ValueError as err:
                raise TraceError(f"{path}:{number}: {err}") from None
            for name, value in zip(SWIM_COLUMNS[3:], sizes):
                if value < 0:
                    raise TraceError(f"{path}:{number}: {name} is negative ({value})")
            if submit < 0:
                raise TraceError(f"{path}:{number}: submit time is negative ({submit})")
            if sizes[1] >= min_shuffle_bytes:
                rows.append((fields[0], submit, *sizes))
    if not rows:
        raise TraceError(f"{path}: no jobs" + (f" shuffling at least {min_shuffle_bytes:g} bytes" if min_shuffle_bytes else ""))
    return rows
