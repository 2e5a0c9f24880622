"""A synthetic MapReduce workload shaped after the JobPacker paper's Facebook jobs (its Table 1).

Shuffle sizes are log-normal with median 2.5 GB and 95th percentile 82 GB (sigma = ln(82/2.5)/1.645);
that puts the 5th percentile at 0.08 GB, close to the paper's 0.1 GB. Input is the shuffle divided by a
map selectivity drawn from [0.5, 2], output the shuffle times a reduce selectivity from [0.1, 1]:
Facebook's jobs move roughly as many bytes through the shuffle as they read (SWIM's FB-2009 sample).
"""

from __future__ import annotations

import math
import random

SHUFFLE_MEDIAN_BYTES = 2.5e9
SHUFFLE_P95_BYTES = 82e9
Z95 = 1.6449


def facebook_like(
    n_jobs: int, rng: random.Random, arrival_window_s: float = 0.0, max_shuffle_bytes: float | None = None
) -> list[tuple[str, float, int, int, int]]:
    """(job id, arrival, input, shuffle, output) rows at full scale; arrivals uniform in the window
    (0 = a batch), sorted by arrival. `max_shuffle_bytes` truncates the tail for small testbeds."""
    sigma = math.log(SHUFFLE_P95_BYTES / SHUFFLE_MEDIAN_BYTES) / Z95
    rows = []
    for i in range(n_jobs):
        shuffle = rng.lognormvariate(math.log(SHUFFLE_MEDIAN_BYTES), sigma)
        if max_shuffle_bytes is not None:
            shuffle = min(shuffle, max_shuffle_bytes)
        inp = shuffle / rng.uniform(0.5, 2.0)
        out = shuffle * rng.uniform(0.1, 1.0)
        arrival = rng.uniform(0, arrival_window_s) if arrival_window_s else 0.0
        rows.append((f"job{i}", round(arrival, 3), int(inp), int(shuffle), int(out)))
    return sorted(rows, key=lambda row: row[1])
