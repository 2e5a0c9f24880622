"""DAGPS's offline schedule and lower bounds on small DAGs (the DAGPS paper, §4 and §6)."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from hybridbed.policies.planning.dagps import (
    SUBSET_ORDERS,
    Space,
    build_schedule,
    candidate_troublesome_sets,
    closure,
    lower_bounds,
    place_either_way,
    place_forward,
    place_in_order,
    split,
    totally_ordered_parts,
)


def dag(tasks: dict[str, tuple[float, tuple[float, ...], str]], edges: list[tuple[str, str]]) -> nx.DiGraph:
    graph = nx.DiGraph()
    for name, (duration, demand, stage) in tasks.items():
        graph.add_node(name, duration=duration, demand=demand, stage=stage)
    graph.add_edges_from(edges)
    return graph


def random_dag(rng: random.Random, n: int) -> nx.DiGraph:
    """Stages of like tasks (one duration and demand each); a stage reads from some earlier stages, every
    task of it from every task of them, as the paper's stages do."""
    stages = [f"s{i}" for i in range(rng.randint(2, 5))]
    shape = {s: (rng.uniform(0.5, 5), (rng.uniform(0.05, 1), rng.uniform(0.05, 1))) for s in stages}
    tasks = {f"t{i}": (*shape[stage], stage) for i, stage in enumerate(rng.choice(stages) for _ in range(n))}
    reads = {(a, b) for i, a in enumerate(stages) for b in stages[i + 1 :] if rng.random() < 0.5}
    edges = [(x, y) for x, (_, _, a) in tasks.items() for y, (_, _, b) in tasks.items() if (a, b) in reads]
    return dag(tasks, edges)


def assert_valid(graph: nx.DiGraph, placed: dict[str, tuple[int, float, float]], machines: int) -> None:
    assert set(placed) == set(graph)
    for a, b in graph.edges:
        assert placed[b][1] >= placed[a][2] - 1e-9, (a, b)  # a child starts after its parent ends
    for task, (machine, start, end) in placed.items():
        assert 0 <= machine < machines and end - start == pytest.approx(graph.nodes[task]["duration"])
        running = [graph.nodes[t]["demand"] for t, (m, s, e) in placed.items() if m == machine and s <= start < e]
        assert all(sum(d[r] for d in running) <= 1 + 1e-9 for r in range(2)), (task, running)


def test_lower_bounds_of_a_chain_beside_a_wide_stage():
    # a -> b -> c (a chain of 6 s), and four tasks of one stage each needing half of a machine's memory
    graph = dag(
        {
            "a": (1, (0.1, 0.1), "A"),
            "b": (2, (0.1, 0.1), "B"),
            "c": (3, (0.1, 0.1), "C"),
            **{f"w{i}": (2, (0.1, 0.5), "W") for i in range(4)},
        },
        [("a", "b"), ("b", "c")],
    )
    bounds = lower_bounds(graph, machines=1)
    assert bounds.cp_len == 6
    assert bounds.t_work == pytest.approx(4 * 2 * 0.5 + (1 + 2 + 3) * 0.1)  # memory, one machine
    # ModCP: stage W on its own bound (TWork_W = 4) is the longest single-stage path
    assert bounds.mod_cp == pytest.approx(max(6, 4))
    assert bounds.new_lb == pytest.approx(max(bounds.cp_len, bounds.t_work, bounds.mod_cp))  # one part


def test_new_lb_adds_the_totally_ordered_parts():
    # maps -> reduces, all to all: two parts, each bounded by its own work
    tasks = {
        **{f"m{i}": (1, (0.5, 0.1), "map") for i in range(4)},
        **{f"r{j}": (2, (0.1, 0.6), "red") for j in range(2)},
    }
    graph = dag(tasks, [(f"m{i}", f"r{j}") for i in range(4) for j in range(2)])
    assert totally_ordered_parts(graph) == [[f"m{i}" for i in range(4)], ["r0", "r1"]]
    bounds = lower_bounds(graph, machines=2)
    assert bounds.new_lb == pytest.approx(max(1, 4 * 0.5 / 2) + max(2, 2 * 2 * 0.6 / 2))
    schedule = build_schedule(graph, machines=2)
    assert schedule.makespan == pytest.approx(bounds.new_lb)  # two maps per machine, then one reduce each


def test_closure_adds_every_task_between_two_chosen_ones():
    graph = dag({n: (1, (0.1,), n) for n in "abcde"}, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "e")])
    assert closure(graph, {"a", "c"}) == {"a", "b", "c"}
    assert split(graph, closure(graph, {"b"})) == {"T": {"b"}, "P": {"a"}, "C": {"c", "d"}, "O": {"e"}}


@pytest.mark.parametrize("seed", range(12))
def test_every_subset_order_gives_a_valid_schedule(seed):
    rng = random.Random(seed)
    graph, machines = random_dag(rng, rng.randint(4, 14)), rng.randint(1, 3)
    for troublesome in candidate_troublesome_sets(graph, machines):
        parts = split(graph, troublesome)
        placed_t = place_either_way(parts["T"], Space(machines), graph)
        for order in SUBSET_ORDERS:
            assert_valid(graph, place_in_order(order, parts, placed_t, graph).placed, machines)
    best = build_schedule(graph, machines)
    assert_valid(graph, best.placed, machines)
    assert min(s for _, s, _ in best.placed.values()) == 0
    assert best.makespan >= lower_bounds(graph, machines).new_lb - 1e-9


def test_troublesome_tasks_first_overlaps_the_long_tasks():
    """The DAGPS paper's §2.2 situation: three long tasks that fit together, two of them behind short tasks
    that cannot run beside a long one. Greedy list scheduling starts the ready long task and serialises;
    placing the long tasks first and their parents before them overlaps all three."""
    long, short = (10.0, (0.3, 0.3)), (0.1, (0.1, 0.8))
    graph = dag(
        {"t0": (*long, "A"), "t2": (*long, "B"), "t4": (*long, "B"), "t1": (*short, "C"), "t3": (*short, "C")},
        [("t1", "t2"), ("t3", "t4"), ("t1", "t4"), ("t3", "t2")],
    )
    greedy = place_forward(set(graph), Space(1), graph)
    assert greedy.length == pytest.approx(20.2)
    schedule = build_schedule(graph, machines=1)
    assert schedule.makespan == pytest.approx(10.2)
    assert {"t0", "t2", "t4"} <= schedule.troublesome
    scores = schedule.pri_scores()
    assert min(scores["t1"], scores["t3"]) > max(scores["t0"], scores["t2"], scores["t4"])


def test_a_task_larger_than_a_machine_is_refused():
    with pytest.raises(ValueError, match="task big"):
        build_schedule(dag({"big": (1, (1.5,), "B")}, []), machines=2)
