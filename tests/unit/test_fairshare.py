"""Max-min fair rates on hand-checked cases, and against a plain progressive filling on random ones."""

from __future__ import annotations

import numpy as np
import pytest

from hybridbed.simulator.fairshare import max_min_rates

INF = np.inf


def rates(paths: list[list[int]], capacities: list[float], caps: list[float] | None = None) -> list[float]:
    none = len(capacities)
    width = max(len(p) for p in paths)
    padded = np.array([p + [none] * (width - len(p)) for p in paths])
    caps_array = np.array(caps if caps is not None else [INF] * len(paths), dtype=float)
    return max_min_rates(padded, np.array(capacities + [INF]), caps_array).tolist()


def test_flows_on_one_link_split_it_evenly():
    assert rates([[0], [0], [0], [0]], [12.0]) == pytest.approx([3, 3, 3, 3])


def test_a_flow_held_back_elsewhere_leaves_its_share_to_the_others():
    # link 0 (10) carries a, b, c; link 1 (2) also carries a: a gets 2, b and c split the other 8
    assert rates([[0, 1], [0], [0]], [10.0, 2.0]) == pytest.approx([2, 4, 4])


def test_the_classic_parking_lot():
    # links 0 and 1 of capacity 1; the long flow crosses both, one short flow on each: all get 1/2
    assert rates([[0, 1], [0], [1]], [1.0, 1.0]) == pytest.approx([0.5, 0.5, 0.5])


def test_two_bottleneck_levels_at_once():
    # link 0 (3) has three flows, link 1 (8) two others and one of the first three:
    # link 0 gives 1 each, so the shared flow takes 1 and link 1's others split the remaining 7
    assert rates([[0], [0], [0, 1], [1], [1]], [3.0, 8.0]) == pytest.approx([1, 1, 1, 3.5, 3.5])


def test_caps_bind_before_links_and_free_the_rest():
    assert rates([[0], [0], [0]], [9.0], caps=[1.0, INF, INF]) == pytest.approx([1, 4, 4])
    assert rates([[0], [0]], [9.0], caps=[10.0, 10.0]) == pytest.approx([4.5, 4.5])


def test_a_flow_with_nothing_to_limit_it_is_infinite_and_an_empty_set_is_fine():
    assert rates([[], [0]], [5.0]) == [INF, 5.0]
    assert max_min_rates(np.zeros((0, 4), dtype=int), np.array([1.0, INF]), np.zeros(0)).size == 0


def progressive_filling(paths: list[list[int]], capacities: list[float], caps: list[float]) -> list[float]:
    """The textbook algorithm, one level at a time, in plain Python."""
    rate = [0.0] * len(paths)
    frozen = [False] * len(paths)
    while not all(frozen):
        live = [f for f in range(len(paths)) if not frozen[f]]
        headroom = []
        for link, capacity in enumerate(capacities):
            on = [f for f in live if link in paths[f]]
            if on:
                used = sum(rate[f] for f in range(len(paths)) if link in paths[f])
                headroom.append(((capacity - used) / len(on), link))
        step = min([h for h, _ in headroom] + [caps[f] - rate[f] for f in live])
        for f in live:
            rate[f] += step
        full = {link for h, link in headroom if h - step <= 1e-9}
        for f in live:
            if caps[f] - rate[f] <= 1e-9 or full & set(paths[f]):
                frozen[f] = True
    return rate


@pytest.mark.parametrize("seed", range(20))
def test_matches_plain_progressive_filling(seed):
    rng = np.random.default_rng(seed)
    n_links, n_flows = int(rng.integers(2, 8)), int(rng.integers(1, 25))
    capacities = rng.uniform(1, 10, n_links).round(1).tolist()
    paths = [
        sorted(rng.choice(n_links, size=int(rng.integers(1, min(4, n_links) + 1)), replace=False).tolist())
        for _ in range(n_flows)
    ]
    caps = [float(rng.uniform(0.2, 5)) if rng.random() < 0.3 else INF for _ in range(n_flows)]
    expected = progressive_filling(paths, capacities, [c if c != INF else 1e18 for c in caps])
    assert rates(paths, capacities, caps) == pytest.approx(expected, rel=1e-6)


def test_a_weighted_row_counts_as_that_many_identical_flows():
    paths = np.array([[0, 2], [1, 2]])
    capacities = np.array([12.0, 12.0, np.inf])
    weighted = max_min_rates(paths, capacities, np.full(2, np.inf), weights=np.array([3, 1]))
    expanded = max_min_rates(np.array([[0, 2]] * 3 + [[1, 2]]), capacities, np.full(4, np.inf))
    assert weighted.tolist() == pytest.approx([expanded[0], expanded[3]])
    assert weighted.tolist() == pytest.approx([4, 12])
