"""Max-min fair rates of flows over shared links (progressive filling), vectorized with numpy.

Every flow crosses a few links (its path) and may have a rate cap of its own. In progressive filling
all unfrozen flows rise together and a link that runs out freezes the flows it carries. A link's fair
share (capacity left / unfrozen flows on it) never falls as other flows freeze, so a link whose share
is no larger than the bound of every flow it carries (the smallest share on that flow's path, or its
cap) freezes its flows at that share, whatever else happens; and a flow whose cap is below every
share on its path freezes at its cap. Each round freezes all such links and caps at once, not just
the single lowest level, so a round is a few vector operations and rounds are few.
"""
from __future__ import annotations

import numpy as np

RELATIVE_TOLERANCE = 1e-9  # shares within this of each other count as equal


def max_min_rates(paths: np.ndarray, capacities: np.ndarray, caps: np.ndarray,
                  weights: np.ndarray | None = None) -> np.ndarray:
    """Rates of F flows (each row may stand for `weights[i]` identical flows, which share its path and
    cap and each get the returned rate). `paths` is (F, K) link indices, padded with a link of infinite
    capacity; `capacities` holds every link's capacity; `caps` each flow's own limit (inf: none).
    A flow with neither a finite link nor a cap gets an infinite rate."""
    flows, hops = paths.shape
    rates = np.zeros(flows)
    links = capacities.size
    remaining = capacities.astype(float)
    active = np.arange(flows)
    flat = np.ascontiguousarray(paths.T).ravel()  # hop-major: hop k of every active flow, then hop k+1
    active_caps = caps.astype(float)
    active_weights = np.ones(flows) if weights is None else weights.astype(float)
    while active.size:
        width = active.size
        counts = np.bincount(flat, weights=np.concatenate((active_weights,) * hops), minlength=links)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(counts > 0, remaining / counts, np.inf)
        path_min = share[flat].reshape(hops, width).min(axis=0)
        bound = np.minimum(path_min, active_caps)
        lowest = np.full(links, np.inf)  # per link: the lowest bound among the flows it carries
        np.minimum.at(lowest, flat, np.concatenate((bound,) * hops))
        saturates = share <= lowest * (1 + RELATIVE_TOLERANCE)
        freeze = saturates[flat].reshape(hops, width).any(axis=0)
        freeze |= (active_caps <= path_min * (1 + RELATIVE_TOLERANCE)) | ~np.isfinite(bound)
        rates[active[freeze]] = bound[freeze]
        used = np.where(freeze & np.isfinite(bound), bound * active_weights, 0.0)
        np.maximum(remaining - np.bincount(flat, weights=np.concatenate((used,) * hops), minlength=links), 0.0, out=remaining)
        keep = ~freeze
        active, active_caps, active_weights = active[keep], active_caps[keep], active_weights[keep]
        flat = flat[np.concatenate((keep,) * hops)]
    return rates
