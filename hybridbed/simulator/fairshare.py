"""Max-min fair rates of flows over shared links (progressive filling), compiled with numba.

Every flow crosses a few links (its path) and may have a rate cap of its own. In progressive filling
all unfrozen flows rise together and a link that runs out freezes the flows it carries. A link's fair
share (capacity left / unfrozen flows on it) never falls as other flows freeze, so a link whose share
is no larger than the bound of every flow it carries (the smallest share on that flow's path, or its
cap) freezes its flows at that share, whatever else happens; and a flow whose cap is below every
share on its path freezes at its cap. Each round freezes all such links and caps at once, not just
the single lowest level, so rounds are few (about 20 at the paper's scale).

At the paper's scale a computation covers some 18,000 flow classes and runs tens of thousands of
times per run; a round is two passes over the unfrozen flows, so it is compiled (numba) rather
than spelled as numpy array expressions, which would build a dozen temporaries per round.
"""

from __future__ import annotations

import numba
import numpy as np

RELATIVE_TOLERANCE = 1e-9  # shares within this of each other count as equal


def max_min_rates(
    paths: np.ndarray, capacities: np.ndarray, caps: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Rates of F flows (each row may stand for `weights[i]` identical flows, which share its path and
    cap and each get the returned rate). `paths` is (F, K) link indices, padded with a link of infinite
    capacity; `capacities` holds every link's capacity; `caps` each flow's own limit (inf: none).
    A flow with neither a finite link nor a cap gets an infinite rate."""
    flows = paths.shape[0]
    return _progressive_filling(
        np.ascontiguousarray(paths, dtype=np.int64),
        np.asarray(capacities, dtype=np.float64),
        np.asarray(caps, dtype=np.float64),
        np.ones(flows) if weights is None else np.asarray(weights, dtype=np.float64),
    )


@numba.njit(cache=True)
def _progressive_filling(paths, capacities, caps, weights):  # pragma: no cover (compiled)
    flows, hops = paths.shape
    links = capacities.size
    rates = np.zeros(flows)
    remaining = capacities.copy()
    active = np.arange(flows)
    path_min = np.empty(flows)
    bound = np.empty(flows)
    counts = np.zeros(links)  # per link: the unfrozen flows it carries (kept up to date as flows freeze)
    for f in range(flows):
        for h in range(hops):
            counts[paths[f, h]] += weights[f]
    share = np.empty(links)
    lowest = np.empty(links)
    width = flows
    while width:
        for link in range(links):
            share[link] = remaining[link] / counts[link] if counts[link] > 0 else np.inf
        lowest[:] = np.inf  # per link: the lowest bound among the flows it carries
        for i in range(width):
            f = active[i]
            smallest = np.inf
            for h in range(hops):
                smallest = min(smallest, share[paths[f, h]])
            path_min[i] = smallest
            bound[i] = min(smallest, caps[f])
            for h in range(hops):
                link = paths[f, h]
                lowest[link] = min(lowest[link], bound[i])
        kept = 0
        for i in range(width):
            f = active[i]
            freeze = caps[f] <= path_min[i] * (1 + RELATIVE_TOLERANCE) or not np.isfinite(bound[i])
            for h in range(hops):
                link = paths[f, h]
                freeze = freeze or share[link] <= lowest[link] * (1 + RELATIVE_TOLERANCE)
            if freeze:
                rates[f] = bound[i]
                for h in range(hops):
                    link = paths[f, h]
                    counts[link] -= weights[f]
                    if np.isfinite(bound[i]):
                        remaining[link] = max(remaining[link] - bound[i] * weights[f], 0.0)
            else:
                active[kept] = f
                kept += 1
        width = kept
    return rates
