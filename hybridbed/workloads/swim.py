"""Reader for the SWIM workload format (Chen et al., MASCOTS'11; Facebook FB-2009/FB-2010 samples).

One job per line, six tab-separated columns: job id, submit time (s), gap to the previous job (s),
map input bytes, shuffle bytes, reduce output bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

from hybridbed.config.validation import SpecError

SwimRow = tuple[str, float, int, int, int]  # job id, submit time, input, shuffle and output bytes
SWIM_COLUMNS = ("job id", "submit time", "inter-job gap", "map input bytes", "shuffle bytes", "reduce output bytes")


class TraceError(SpecError):
    """A trace line that does not follow the format, or a selection the trace cannot fill; the message names
    the file and line. A bad trace is bad input, reported as any scenario field is."""


def read_swim(
    path: Path, limit: int | None = None, min_shuffle_bytes: float = 0, max_shuffle_bytes: float = math.inf
) -> list[SwimRow]:
    """(job id, submit time, input, shuffle, output) per job, in file order; at most `limit` jobs, and
    only those shuffling between `min_shuffle_bytes` and `max_shuffle_bytes` (how a study selects its
    jobs from a sample)."""
    rows: list[SwimRow] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise TraceError(f"{path}: not a text trace ({err})") from None
    for number, line in enumerate(lines, start=1):
        if limit is not None and len(rows) >= limit:
            break
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(SWIM_COLUMNS):
            raise TraceError(
                f"{path}:{number}: expected {len(SWIM_COLUMNS)} tab-separated columns "
                f"({', '.join(SWIM_COLUMNS)}), found {len(fields)}"
            )
        try:
            submit = float(fields[1])
            sizes = [int(f) for f in fields[3:]]
        except ValueError as err:
            raise TraceError(f"{path}:{number}: {err}") from None
        for name, value in zip(SWIM_COLUMNS[3:], sizes):
            if value < 0:
                raise TraceError(f"{path}:{number}: {name} is negative ({value})")
        if not 0 <= submit < math.inf:
            raise TraceError(f"{path}:{number}: submit time must be a finite non-negative number ({submit})")
        if min_shuffle_bytes <= sizes[1] <= max_shuffle_bytes:
            rows.append((fields[0], submit, sizes[0], sizes[1], sizes[2]))
    if not rows:
        raise TraceError(f"{path}: no jobs shuffling between {min_shuffle_bytes:g} and {max_shuffle_bytes:g} bytes")
    return rows


def read_swim_files(
    paths: list[Path], limit: int | None = None, min_shuffle_bytes: float = 0, max_shuffle_bytes: float = math.inf
) -> list[SwimRow]:
    """Jobs of several samples, one file after the other (as read_swim); with more than one file, job
    ids get the file's position as a prefix (t0.job9, t1.job9), since every sample numbers from job0."""
    rows: list[SwimRow] = []
    for k, path in enumerate(paths):
        if limit is not None and len(rows) >= limit:
            break
        found = read_swim(path, None if limit is None else limit - len(rows), min_shuffle_bytes, max_shuffle_bytes)
        prefix = f"t{k}." if len(paths) > 1 else ""
        rows += [(prefix + job_id, submit, inp, shuffle, out) for job_id, submit, inp, shuffle, out in found]
    return rows
