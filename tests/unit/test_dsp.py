"""DSP's per-level deadlines and dependency-aware priorities (Eqs. 12-13) on a hand DAG."""

from __future__ import annotations

import networkx as nx
import pytest

from hybridbed.policies.planning.dsp import allowable_waits, levels, priorities, task_deadlines


def hand_dag() -> nx.DiGraph:
    """a -> b -> d, a -> c -> d, a -> e (a leaf one level down)."""
    dag = nx.DiGraph([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "e")])
    for task, duration in {"a": 2.0, "b": 3.0, "c": 1.0, "d": 4.0, "e": 1.0}.items():
        dag.nodes[task]["duration"] = duration
    return dag


def test_levels_and_per_level_deadlines():
    dag = hand_dag()
    assert levels(dag) == {"a": 1, "b": 2, "c": 2, "e": 2, "d": 3}
    # deadline 20 less the longest task of each deeper level (level 2: 3 s, level 3: 4 s)
    assert task_deadlines(dag, 20.0) == {"a": 13.0, "b": 16.0, "c": 16.0, "e": 16.0, "d": 20.0}
    remaining = {t: dag.nodes[t]["duration"] for t in dag}
    assert allowable_waits(dag, 1.0, 20.0, remaining) == {"a": 10.0, "b": 12.0, "c": 14.0, "e": 14.0, "d": 15.0}


def test_priorities_weigh_dependents_level_by_level():
    dag = hand_dag()
    remaining = {t: dag.nodes[t]["duration"] for t in dag}
    waiting = {"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0, "e": 2.0}
    p = priorities(dag, 0.0, 20.0, remaining, waiting)
    # leaves, Eq. 13: 0.5 / t_rem + 0.3 t_wait + 0.2 t_allow
    assert p["d"] == pytest.approx(0.5 / 4 + 0.2 * (20 - 4))  # 3.325
    assert p["e"] == pytest.approx(0.5 / 1 + 0.3 * 2 + 0.2 * (16 - 1))  # 4.1
    # the others, Eq. 12: (1 + gamma) times each child's priority, summed
    assert p["b"] == pytest.approx(1.5 * p["d"]) and p["c"] == pytest.approx(1.5 * p["d"])
    assert p["a"] == pytest.approx(1.5 * (p["b"] + p["c"] + p["e"]))
    assert p["a"] > p["b"] > p["e"] > p["d"]  # more dependents below, higher priority
    with pytest.raises(ValueError, match="gamma"):
        priorities(dag, 0.0, 20.0, remaining, waiting, gamma=1.5)


def test_a_stage_edge_counts_once_whatever_the_stages_width():
    """Eq. 12 over stages linked all-to-all: a map feeding 100 reducers of one stage weighs them as one
    dependency (1.5 x their mean priority), not 100 (150x); alike maps and reducers, so their widths change
    nothing."""

    def stages(maps: int, reducers: int) -> nx.DiGraph:
        dag = nx.DiGraph()
        for i in range(maps):
            dag.add_node(f"m{i}", duration=2.0, stage=0)
        for j in range(reducers):
            dag.add_node(f"r{j}", duration=4.0, stage=1)
        dag.add_edges_from((f"m{i}", f"r{j}") for i in range(maps) for j in range(reducers))
        return dag

    for maps, reducers in ((1, 1), (10, 100)):
        dag = stages(maps, reducers)
        remaining = {t: dag.nodes[t]["duration"] for t in dag}
        p = priorities(dag, 0.0, 20.0, remaining, {t: 0.0 for t in dag})
        assert p["r0"] == pytest.approx(0.5 / 4 + 0.2 * (20 - 4))
        assert p["m0"] == pytest.approx(1.5 * p["r0"]), (maps, reducers)
