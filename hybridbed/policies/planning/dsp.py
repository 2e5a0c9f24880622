"""DSP's dependency-aware task priorities (Sun et al., "DSP: dependency-aware scheduling and preemption",
§IV-A/B, Eqs. 12-13) and the per-level deadlines they rest on.

A job is a DAG of tasks (networkx, nodes with a `duration` in seconds) with a deadline. Levels count from
the roots (level 1); L is the deepest. A task at level l must end by the job's deadline less, for every
deeper level, the longest task there (§IV-B); its allowable waiting time is that deadline less now and
its remaining time. Priorities, higher first:

    leaf (no dependents):  P = ω1 / t_rem + ω2 · t_wait + ω3 · t_allow           (Eq. 13)
    others:                P = Σ over its children c of (γ + 1) · P_c              (Eq. 12)

so a task with more dependents on more levels below it goes first (γ = 0.5, ω = 0.5, 0.3, 0.2: Table II).
Children that share a `stage` node attribute count as one dependency, at their mean priority: the paper's
DAGs link tasks sparsely (at most 15 dependents, §V), where a stage's all-to-all edges (every map feeds
every reducer) would multiply a task's priority by the width of every stage below it.
Eq. 13 as written rewards more allowable waiting time; urgency is DSP's preemption rule's business
(a task whose allowable wait is below ε preempts regardless), so the formula is kept as the paper has it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeVar

import networkx as nx

Node = TypeVar("Node", bound=Hashable)  # a task of the DAG, however the caller names it

GAMMA = 0.5
OMEGA = (0.5, 0.3, 0.2)
MIN_REMAINING_S = 1e-3  # a task about to end: 1 / t_rem stays finite


def levels(dag: nx.DiGraph) -> dict[Any, int]:
    """Each task's level: 1 for a root, else one more than its deepest parent."""
    level: dict[Any, int] = {}
    for task in nx.topological_sort(dag):
        level[task] = 1 + max((level[p] for p in dag.predecessors(task)), default=0)
    return level


def task_deadlines(dag: nx.DiGraph, deadline_s: float) -> dict[Any, float]:
    """§IV-B: the job's deadline less the longest task of every level below a task's own."""
    level = levels(dag)
    deepest = max(level.values(), default=0)
    longest = {l: 0.0 for l in range(1, deepest + 1)}
    for task, l in level.items():
        longest[l] = max(longest[l], dag.nodes[task]["duration"])
    after = {l: sum(longest[k] for k in range(l + 1, deepest + 1)) for l in longest}
    return {task: deadline_s - after[l] for task, l in level.items()}


def priorities(
    dag: nx.DiGraph,
    now: float,
    deadline_s: float,
    remaining_s: dict[Node, float],
    waiting_s: dict[Node, float],
    gamma: float = GAMMA,
    omega: tuple[float, float, float] = OMEGA,
) -> dict[Node, float]:
    """Eqs. 12-13 for every task of the DAG. `remaining_s`: time each task still needs (its duration if not
    started); `waiting_s`: how long each has waited since it could run (0 if it cannot yet)."""
    if not 0 < gamma < 1:
        raise ValueError(f"gamma must be in (0, 1), got {gamma}")
    allowable = allowable_waits(dag, now, deadline_s, remaining_s)
    w1, w2, w3 = omega
    priority: dict[Node, float] = {}
    for task in reversed(list(nx.topological_sort(dag))):
        children = list(dag.successors(task))
        if children:
            edges: dict[Any, list[float]] = {}  # one dependency per child stage (per child without one)
            for child in children:
                edges.setdefault(dag.nodes[child].get("stage", child), []).append(priority[child])
            priority[task] = sum((gamma + 1) * sum(group) / len(group) for group in edges.values())
        else:
            remaining = max(remaining_s[task], MIN_REMAINING_S)
            priority[task] = w1 / remaining + w2 * waiting_s[task] + w3 * allowable[task]
    return priority


def allowable_waits(
    dag: nx.DiGraph, now: float, deadline_s: float, remaining_s: dict[Node, float]
) -> dict[Node, float]:
    """t_a: how much longer each task can wait and still meet its level's deadline."""
    deadlines = task_deadlines(dag, deadline_s)
    return {task: deadlines[task] - now - remaining_s[task] for task in dag}
