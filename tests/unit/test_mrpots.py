"""MR-POTS's pieces on one pool: MUA's LP on hand cases, DRP's order, and DRP never starving a subtask."""

from __future__ import annotations

import random

import pytest

from hybridbed.policies.planning.mrpots import PoolSimulation, Subtask, dominant, mua


def test_mua_fills_both_resources_when_two_subtasks_lean_opposite_ways():
    # CPU-heavy (0.8 of the CPU, 0.4 of the network per unit rate) and network-heavy (the mirror image):
    # 0.8 k1 + 0.4 k2 <= 1 and 0.4 k1 + 0.8 k2 <= 1 with 1.2 (k1 + k2) to maximise: k1 = k2 = 1/1.2
    k1, k2 = mua([(0.8, 0.4), (0.4, 0.8)])
    assert k1 == pytest.approx(1 / 1.2) and k2 == pytest.approx(1 / 1.2)
    assert 0.8 * k1 + 0.4 * k2 == pytest.approx(1.0) and 0.4 * k1 + 0.8 * k2 == pytest.approx(1.0)


def test_mua_gives_full_rate_where_the_pool_has_room_and_favours_the_bigger_user_where_it_has_not():
    assert mua([(0.3, 0.1), (0.2, 0.5)]) == pytest.approx([1.0, 1.0])  # both fit whole
    k_big, k_small = mua([(0.9, 0.0), (0.5, 0.0)])  # one resource: 0.9 k1 + 0.5 k2 <= 1, same weights
    assert 0.9 * k_big + 0.5 * k_small == pytest.approx(1.0)
    assert mua([]) == []


def test_dominant_resource_is_the_largest_share():
    assert dominant((0.2, 0.7, 0.1)) == 1 and dominant((0.5, 0.5)) == 0


def test_drp_serves_first_come_first_within_a_group_and_one_per_group():
    pool = PoolSimulation()
    pool.submit([Subtask("a", (2.0, 0.1)), Subtask("b", (1.0, 0.2))])  # both CPU-dominant
    pool.now = 0.0
    pool.submit([Subtask("n", (0.1, 3.0))])  # network-dominant
    picked = {s.key for s in pool.pick()}
    assert picked == {"b", "n"}  # one per group; in the CPU group DRP 0 + 1 beats 0 + 2
    while not pool.done():
        pool.step()
    assert pool.subtasks["b"].finished_at < pool.subtasks["a"].finished_at


def test_predecessors_of_a_waiting_groups_best_go_first():
    """'u' unlocks 'v', which would be the best of the network group once eligible: 'u' is served alone."""
    pool = PoolSimulation()
    pool.submit(
        [
            Subtask("x", (1.5, 0.1)),
            Subtask("u", (1.0, 0.1)),
            Subtask("v", (0.1, 0.5), after=("u",)),
            Subtask("w", (0.1, 4.0)),
        ]
    )
    assert [s.key for s in pool.pick()] == ["u"]
    while not pool.done():
        pool.step()
    assert pool.subtasks["v"].finished_at <= pool.subtasks["w"].finished_at


def test_drp_never_starves_a_long_subtask_in_a_stream_of_short_ones():
    """Shortest first would run the one-slot subtasks arriving every slot forever; DRP's virtual time
    (arrival + length) lets the long one go once the newcomers' DRPs pass its own."""
    pool = PoolSimulation()
    pool.submit([Subtask("long", (10.0, 0.0))])
    for slot in range(60):
        pool.now = float(slot)
        pool.submit([Subtask(f"short{slot}", (0.9, 0.0))])
        pool.step()
        pool.now = float(slot + 1)
        if pool.subtasks["long"].finished_at is not None:
            break
    assert pool.subtasks["long"].finished_at is not None and pool.subtasks["long"].finished_at <= 25


def test_every_subtask_of_random_partial_ordered_tasks_finishes_within_a_bounded_wait():
    rng = random.Random(7)
    pool = PoolSimulation()
    arrivals = {}
    for slot in range(300):
        pool.now = float(slot)
        if slot < 200 and rng.random() < 0.3:  # tasks of 2-5 subtasks, each after one earlier one
            subtasks = []
            for j in range(rng.randint(2, 5)):
                demand = tuple(rng.uniform(0.05, 1.5) for _ in range(3))
                after = (f"t{slot}.{rng.randrange(j)}",) if j else ()
                subtasks.append(Subtask(f"t{slot}.{j}", demand, after))
            pool.submit(subtasks)
            arrivals.update({s.key: slot for s in subtasks})
        pool.step()
        if slot >= 200 and pool.done():
            break
    assert pool.done()
    waits = [s.finished_at - s.eligible_at - s.length for s in pool.subtasks.values()]
    # bounded: no subtask waits behind an endless stream (59.5 slots at most here; shortest first: 189.5)
    assert max(waits) <= 100, max(waits)
    assert sum(pool.utilisation) / len(pool.utilisation) > 0.3
