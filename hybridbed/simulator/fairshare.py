"""Max-min fair rates of flows over shared links (progressive filling), vectorized with numpy.

Every flow crosses a few links (its path) and may have a rate cap of its own. All unfrozen flows rise
together; the first link (or cap) to run out freezes the flows it carries at that level, and the rest
keep rising. Each round freezes at least one bottleneck, so a round per distinct rate level.
"""
from __future__ import annotations

import numpy as np

RELATIVE_TOLERANCE = 1e-9  # links within this of the bottleneck level saturate in the same round


def max_min_rates(paths: np.ndarray, capacities: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Rates of F flows. `paths` is (F, K) link indices, padded with a link of infinite capacity;
    `capacities` holds every link's capacity; `caps` each flow's own limit (inf: none).
    A flow with neither a finite link nor a cap gets an infinite rate."""
    flows = paths.shape[0]
    rates = np.zeros(flows)
    if flows == 0:
        return rates
    links = capacities.size
    remaining = capacities.astype(float).copy()
    active = np.arange(flows)
    active_paths, active_caps = paths, caps
    while active.size:
        counts = np.bincount(active_paths.ravel(), minlength=links)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(counts > 0, remaining / counts, np.inf)
        level = min(share.min(), active_caps.min())
        if not np.isfinite(level):
            rates[active] = np.inf
            break
        limit = level * (1 + RELATIVE_TOLERANCE)
        freeze = (share[active_paths] <= limit).any(axis=1) | (active_caps <= limit)
        rates[active[freeze]] = level
        remaining -= np.bincount(active_paths[freeze].ravel(), minlength=links) * level
        keep = ~freeze
        active, active_paths, active_caps = active[keep], active_paths[keep], active_caps[keep]
    return rates
