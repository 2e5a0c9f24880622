"""Max-min fair rates of flows over shared links, compiled with numba.

Every flow crosses a few links (its path) and may have a rate cap of its own. Two algorithms give the
same rates (within floating-point rounding):

- `max_min_rates`: bottleneck first. A link's fair share (capacity left /
  unfrozen flows on it) never falls as flows freeze at levels no higher than it, so the link with the
  lowest share (or the flow with the lowest cap, if lower) is a bottleneck: its flows freeze at that share,
  and the links they cross give up what they take. The links wait in a heap keyed by their share when last
  looked at, a lower bound of their share now, so a link is re-keyed only when it reaches the top; each
  flow is frozen once, and a computation is one pass over the flows plus the heap's work. The simulator
  runs it over the merged rows of `relaxed_rates.RelaxedMaxMin` (or over every class, where merging
  gains little).
- `progressive_filling_rates`, the reference: rounds over all unfrozen flows; a round freezes every link
  whose share is no larger than the bound of every flow it carries (the smallest share on that flow's path,
  or its cap), and every flow whose cap is below every share on its path (about 15 rounds at the paper's
  scale). It is the earlier implementation, kept to check the other against (tests/unit/test_fairshare.py,
  bench/simulator.py).

At the paper's scale a computation covers some 18,000 flow classes and runs tens of thousands of times per
run; the flow/link graph is one connected component through the 40 ToR-core links, so every
computation covers every flow (a change anywhere can move every rate), and both are compiled.
`RateSolver` is what a flow table may be given instead of its relaxed computation (the tests and
bench/simulator.py give it these two).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

# link indices in flow paths: 32 bits halve the memory a computation passes over (a paper-scale computation reads
# some 17,000 class paths three times and is bound by that memory's speed)
LINK_INDEX = np.int32
RELATIVE_TOLERANCE = 1e-9  # shares within this of each other count as equal (the reference's rounds)

# (paths, capacities, caps, weights) -> rates: what the simulator's flow table calls
RateSolver = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]


def max_min_rates(
    paths: np.ndarray, capacities: np.ndarray, caps: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Rates of F flows (each row may stand for `weights[i]` identical flows, which share its path and
    cap and each get the returned rate). `paths` is (F, K) link indices, padded with a link of infinite
    capacity; `capacities` holds every link's capacity; `caps` each flow's own limit (inf: none).
    A flow with neither a finite link nor a cap gets an infinite rate; a row of weight 0 stands for no flow
    and its rate means nothing."""
    return bottleneck_first(*solver_arrays(paths, capacities, caps, weights))


def progressive_filling_rates(
    paths: np.ndarray, capacities: np.ndarray, caps: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """The same rates by rounds of progressive filling (the reference; slower at scale)."""
    return _progressive_filling(*solver_arrays(paths, capacities, caps, weights))


def solver_arrays(
    paths: np.ndarray, capacities: np.ndarray, caps: np.ndarray, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The solvers' inputs in the types the compiled code takes (no copy where they already are)."""
    return (
        np.ascontiguousarray(paths, dtype=LINK_INDEX),
        np.asarray(capacities, dtype=np.float64),
        np.asarray(caps, dtype=np.float64),
        np.ones(paths.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64),
    )


@numba.njit(cache=True)
def link_loads(paths, weights, rates, links):  # pragma: no cover (compiled)
    """What each of `links` links carries when every row with flows sends at its rate (a row without flows,
    whose rate may be unbounded, carries nothing)."""
    classes, hops = paths.shape
    loads = np.zeros(links)
    for f in range(classes):
        if weights[f] > 0:
            carried = rates[f] * weights[f]  # read once (see `_freeze`)
            for h in range(hops):
                loads[paths[f, h]] += carried
    return loads


@numba.njit(cache=True)
def _heap_before(key_a, id_a, key_b, id_b):  # pragma: no cover (compiled)
    """Heap order: lower share first, then lower link index (so ties resolve the same way every run). Scalars,
    not the heap's arrays: a compiled call taking arrays counts references to them, which cost more than the
    comparison (a solve over 18,000 classes at 10x scale took 5.1 ms that way, 2.0 ms this way)."""
    return key_a < key_b or (key_a == key_b and id_a < id_b)


@numba.njit(cache=True)
def _sift_down(keys, ids, size, i):  # pragma: no cover (compiled)
    while True:
        child = 2 * i + 1
        if child >= size:
            return
        if child + 1 < size and _heap_before(keys[child + 1], ids[child + 1], keys[child], ids[child]):
            child += 1
        if not _heap_before(keys[child], ids[child], keys[i], ids[i]):
            return
        keys[i], keys[child] = keys[child], keys[i]
        ids[i], ids[child] = ids[child], ids[i]
        i = child


@numba.njit(cache=True)
def _freeze(f, rate, paths, weights, counts, remaining, pad):  # pragma: no cover (compiled)
    """Flow (class) f takes `rate` on every link of its path (up to the first `pad`). Its weight and what it takes
    are read once: numba cannot tell that the writes to the links leave them alone, and read at every hop they
    cost a fifth of a solve."""
    weight = weights[f]
    taken = rate * weight
    for h in range(paths.shape[1]):
        link = paths[f, h]
        if link == pad:
            break
        counts[link] -= weight
        remaining[link] = max(remaining[link] - taken, 0.0)


@numba.njit(cache=True)
def bottleneck_first(paths, capacities, caps, weights):  # pragma: no cover (compiled)
    """`max_min_rates` on inputs already in the compiled types (`solver_arrays`), without converting them."""
    counts, start, length, member = _link_members(paths, capacities, weights)
    return fill_bottleneck_first(paths, capacities, caps, weights, counts, start, length, member, -1)


@numba.njit(cache=True)
def _link_members(paths, capacities, weights):  # pragma: no cover (compiled)
    """Per finite link: the flows it carries, counted (`counts`) and listed in ascending order (the `length[link]`
    entries of `member` from `start[link]` on). Rows without flows (weight 0) are left out: they take nothing and
    keep an infinite rate."""
    flows, hops = paths.shape
    links = capacities.size
    counts = np.zeros(links)
    first = np.zeros(links + 1, dtype=np.int64)  # the lists laid out one after the other (compressed sparse rows)
    finite = np.isfinite(capacities)  # a link of infinite capacity never binds: it lists no flows
    for f in range(flows):
        if weights[f] > 0:
            for h in range(hops):
                link = paths[f, h]
                if finite[link]:
                    counts[link] += weights[f]
                    first[link + 1] += 1
    first = np.cumsum(first)
    member = np.empty(first[-1], dtype=np.int64)
    filled = first[:-1].copy()
    for f in range(flows):
        if weights[f] > 0:
            for h in range(hops):
                link = paths[f, h]
                if finite[link]:
                    member[filled[link]] = f
                    filled[link] += 1
    return counts, first[:-1], np.diff(first), member


@numba.njit(cache=True)
def fill_bottleneck_first(paths, capacities, caps, weights, counts, start, length, member, pad):  # pragma: no cover
    """Bottleneck first, given each finite link's flows: `counts` (the weights of those it carries, which this
    uses up) and its list of them (`start`, `length`, `member` as `_link_members` makes them; a list may also
    name flows of weight 0, which are passed over). The relaxed computation keeps these up to date between
    calls instead of making them at each. A path ends at its first `pad` link (-1: every hop is a link): the
    relaxed computation's rows put their padding last, so that freezing a row does not update the padding
    link over and over (a chain of dependent writes to one place, a quarter of a solve at 10x scale)."""
    flows = paths.shape[0]
    links = capacities.size
    rates = np.full(flows, np.inf)
    remaining = capacities.copy()
    # the heap of finite links with flows, keyed by their share when last looked at
    keys = np.empty(links)
    ids = np.empty(links, dtype=np.int64)
    size = 0
    for link in range(links):
        if counts[link] > 0 and np.isfinite(capacities[link]):
            keys[size], ids[size] = remaining[link] / counts[link], link
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(keys, ids, size, i)
    frozen = np.zeros(flows, dtype=np.bool_)
    capped = np.flatnonzero(np.isfinite(caps))  # most flows have no cap of their own: sort only the others
    by_cap = capped[np.argsort(caps[capped], kind="mergesort")]
    next_cap = 0  # the unfrozen capped flow with the lowest cap is by_cap[next_cap]
    while True:
        while next_cap < by_cap.size and frozen[by_cap[next_cap]]:
            next_cap += 1
        bottleneck, share = -1, np.inf
        while size:
            link = ids[0]
            if counts[link] <= 0:  # all its flows are frozen: out of the heap
                size -= 1
                keys[0], ids[0] = keys[size], ids[size]
                _sift_down(keys, ids, size, 0)
                continue
            now = remaining[link] / counts[link]
            if now > keys[0]:  # its share rose since it was keyed: re-key it and look again
                keys[0] = now
                _sift_down(keys, ids, size, 0)
                continue
            bottleneck, share = link, now
            break
        cap = caps[by_cap[next_cap]] if next_cap < by_cap.size else np.inf
        if cap <= share:
            if not np.isfinite(cap):
                break  # the flows left have no finite link and no cap: infinite rates
            f = by_cap[next_cap]
            frozen[f], rates[f] = True, cap
            _freeze(f, cap, paths, weights, counts, remaining, pad)
            continue
        froze = False
        for i in range(start[bottleneck], start[bottleneck] + length[bottleneck]):
            f = member[i]
            if not frozen[f] and weights[f] > 0:
                frozen[f], rates[f], froze = True, share, True
                _freeze(f, share, paths, weights, counts, remaining, pad)
        if not froze:  # none of its flows left: its count is rounding (fractional weights), not flows
            counts[bottleneck] = 0.0
    return rates


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
