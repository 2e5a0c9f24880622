"""DAGPS's offline part (Grandl et al., "Do the Hard Stuff First", §4 and §6): a compact preferred
schedule per DAG, built by placing the troublesome tasks first in a resource-time space, and the lower
bounds on a DAG's runtime the paper measures schedules against.

A DAG is a networkx DiGraph whose nodes are tasks with a `duration` (s), a `demand` (a tuple of
fractions of one machine's resources, each in [0, 1]) and a `stage`; edges are precedence constraints.

BuildSchedule (Fig. 5): for every candidate troublesome set T (Fig. 6: tasks whose LongScore reaches a
threshold l or whose stage's FragScore is at most f, for l, f over a grid of step δ, closed under paths
between members, each distinct set once), split the rest into P (T's ancestors), C (T's descendants)
and O (the others); place T (forward or backward, whichever is more compact), then each of the four
dead-end-free orders TOPC, TOCP, TCOP, TPOC (Fig. 7: P always backward, C always forward, O in the
direction its position allows), and keep the most compact schedule over all sets and orders.

Placement (Fig. 7): forward, the longest task whose parents in the set are placed goes at the earliest
time after its placed parents end when some machine has room for it for its whole duration; backward
is the same on the reversed DAG in mirrored time (the latest time that ends before its placed
children start). Times may go negative while building; a schedule is shifted to start at 0.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from hybridbed.policies.planning.resource_time import UsageTimeline

FIT_TOLERANCE = 1e-9
DEFAULT_STEP = 0.1  # δ: the paper gives none; 0.1 makes at most 100 threshold pairs, far fewer distinct sets


@dataclass
class Space:
    """A resource-time space of `machines` machines of capacity 1 in every dimension, and where each
    placed task runs: (machine, start, end)."""

    machines: int
    placed: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    _on: list[UsageTimeline] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self._on:
            self._on = [UsageTimeline(time_tolerance=FIT_TOLERANCE) for _ in range(self.machines)]

    def copy(self) -> Space:
        return Space(self.machines, dict(self.placed), [timeline.copy() for timeline in self._on])

    def mirrored(self) -> Space:
        """The same space with time running backwards (t -> -t)."""
        placed = {task: (machine, -end, -start) for task, (machine, start, end) in self.placed.items()}
        return Space(self.machines, placed, [timeline.mirrored() for timeline in self._on])

    @property
    def span(self) -> tuple[float, float]:
        """Earliest start and latest end of anything placed ((0, 0) when empty)."""
        if not self.placed:
            return 0.0, 0.0
        return min(s for _, s, _ in self.placed.values()), max(e for _, _, e in self.placed.values())

    @property
    def length(self) -> float:
        first, last = self.span
        return last - first

    def place(self, task: str, duration: float, demand: tuple[float, ...], not_before: float) -> None:
        """Put the task at the earliest time >= not_before when a machine holds it for its whole duration."""
        best: tuple[float, int] | None = None
        for machine, timeline in enumerate(self._on):
            start = timeline.earliest_fit(duration, demand, not_before)
            if best is None or start < best[0] - FIT_TOLERANCE:
                best = (start, machine)
        start, machine = best
        self.placed[task] = (machine, start, start + duration)
        if duration > 0:
            self._on[machine].add(start, start + duration, demand)


def check_demands(dag: nx.DiGraph) -> None:
    """Every task fits one empty machine; else no schedule exists."""
    for task, data in dag.nodes(data=True):
        if any(d < 0 or d > 1 + FIT_TOLERANCE for d in data["demand"]):
            raise ValueError(f"task {task}: demand {data['demand']} is not within one machine's capacity")
        if data["duration"] < 0:
            raise ValueError(f"task {task}: negative duration {data['duration']}")


# placement ----------------------------------------------------------------------------------------
def place_forward(tasks: set[str], space: Space, dag: nx.DiGraph) -> Space:
    """PlaceTasksF: longest ready task first, at the earliest fit after its placed parents end."""
    space = space.copy()
    _place_greedily(tasks, space, dag, parents=dag.predecessors, children=dag.successors)
    return space


def place_backward(tasks: set[str], space: Space, dag: nx.DiGraph) -> Space:
    """PlaceTasksB: forward placement of the reversed DAG in mirrored time."""
    mirrored = space.mirrored()
    _place_greedily(tasks, mirrored, dag, parents=dag.successors, children=dag.predecessors)
    return mirrored.mirrored()


@functools.total_ordering
class _Descending:
    """Orders task names backwards, so a min-heap of (-duration, _Descending(name)) pops the longest task,
    ties broken by the greatest name (deterministic whatever the names are)."""

    __slots__ = ("name",)

    def __init__(self, name) -> None:
        self.name = name

    def __lt__(self, other: _Descending) -> bool:
        return self.name > other.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.name == other.name


def _place_greedily(tasks: set[str], space: Space, dag: nx.DiGraph, parents, children) -> None:
    """The longest task whose parents in `tasks` are placed goes next (a heap of ready tasks, kept by
    counting each task's parents still to place)."""
    floor = space.span[0]  # a task with nothing placed before it starts with the space
    waiting = {t: sum(1 for p in parents(t) if p in tasks) for t in tasks}
    ready = [(-dag.nodes[t]["duration"], _Descending(t)) for t, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    while ready:
        task = heapq.heappop(ready)[1].name
        placed_before = [space.placed[p][2] for p in parents(task) if p in space.placed]
        data = dag.nodes[task]
        space.place(task, data["duration"], data["demand"], max(placed_before, default=floor))
        for child in children(task):
            if child in waiting:
                waiting[child] -= 1
                if waiting[child] == 0:
                    heapq.heappush(ready, (-dag.nodes[child]["duration"], _Descending(child)))


def place_either_way(tasks: set[str], space: Space, dag: nx.DiGraph) -> Space:
    """PlaceTasks: forward or backward, whichever leaves the shorter schedule."""
    return min(place_forward(tasks, space, dag), place_backward(tasks, space, dag), key=lambda s: s.length)


SUBSET_ORDERS = ("TOPC", "TOCP", "TCOP", "TPOC")


def place_in_order(order: str, parts: dict[str, set[str]], placed_t: Space, dag: nx.DiGraph) -> Space:
    """One of the four dead-end-free orders after T: P backward, C forward, O as its position allows."""
    space = placed_t
    for position, part in enumerate(order[1:], start=1):
        tasks = parts[part]
        if part == "P":
            space = place_backward(tasks, space, dag)
        elif part == "C":
            space = place_forward(tasks, space, dag)
        elif position == 1:
            space = place_either_way(tasks, space, dag)
        else:  # O after C goes backward, after P forward
            space = (
                place_backward(tasks, space, dag) if order[position - 1] == "C" else place_forward(tasks, space, dag)
            )
    return space


# troublesome tasks --------------------------------------------------------------------------------
def long_scores(dag: nx.DiGraph) -> dict[str, float]:
    longest = max(d["duration"] for _, d in dag.nodes(data=True)) or 1.0
    return {t: d["duration"] / longest for t, d in dag.nodes(data=True)}


def frag_scores(dag: nx.DiGraph, machines: int) -> dict[str, float]:
    """Per task, its stage's TWork over the time a greedy packer needs for the stage alone on empty
    machines: low means hard to pack."""
    scores = {}
    for tasks in stages(dag).values():
        packed = place_forward(set(tasks), Space(machines), dag.subgraph(tasks)).length
        work = total_work(dag, tasks, machines)
        for t in tasks:
            scores[t] = work / packed if packed > 0 else 1.0
    return scores


def reachable(dag: nx.DiGraph, sources: set[str], forward: bool = True) -> set[str]:
    """Every task below (forward) or above some task of `sources`, not counting the sources themselves
    unless reached from another: one traversal for the whole set."""
    step = dag.successors if forward else dag.predecessors
    found: set[str] = set()
    frontier = [n for t in sources for n in step(t)]
    while frontier:
        task = frontier.pop()
        if task not in found:
            found.add(task)
            frontier.extend(n for n in step(task) if n not in found)
    return found


def closure(dag: nx.DiGraph, chosen: set[str]) -> frozenset[str]:
    """The chosen tasks and every task on a path between two of them."""
    return frozenset(chosen | (reachable(dag, chosen) & reachable(dag, chosen, forward=False)))


def candidate_troublesome_sets(dag: nx.DiGraph, machines: int, step: float = DEFAULT_STEP) -> list[frozenset[str]]:
    """CandidateTroublesomeTasks (Fig. 6): distinct closed sets over the (l, f) threshold grid."""
    longs, frags = long_scores(dag), frag_scores(dag, machines)
    grid = [round(step * i, 10) for i in range(1, int(round(1 / step)) + 1)]
    closed: dict[frozenset[str], frozenset[str]] = {}  # each distinct selection is closed once (§4.1)
    seen: list[frozenset[str]] = []
    for l, f in itertools.product(grid, grid):
        chosen = frozenset(t for t in dag if longs[t] >= l - 1e-12 or frags[t] <= f + 1e-12)
        if chosen not in closed:
            closed[chosen] = closure(dag, set(chosen))
        if closed[chosen] not in seen:
            seen.append(closed[chosen])
    return seen


def split(dag: nx.DiGraph, troublesome: frozenset[str]) -> dict[str, set[str]]:
    """T, and the rest as P (ancestors of T), C (descendants of T) and O (the others)."""
    ancestors = reachable(dag, set(troublesome), forward=False) - troublesome
    descendants = reachable(dag, set(troublesome)) - troublesome
    others = set(dag) - troublesome - ancestors - descendants
    return {"T": set(troublesome), "P": ancestors, "C": descendants, "O": others}


@dataclass(frozen=True)
class DagSchedule:
    placed: dict[str, tuple[int, float, float]]  # task -> (machine, start, end), the schedule starting at 0
    makespan: float
    troublesome: frozenset[str]
    order: str

    @classmethod
    def of(cls, space: Space, troublesome: frozenset[str], order: str) -> DagSchedule:
        first = space.span[0]
        return cls(
            {t: (m, s - first, e - first) for t, (m, s, e) in space.placed.items()}, space.length, troublesome, order
        )

    @property
    def starts(self) -> dict[str, float]:
        return {t: s for t, (_, s, _) in self.placed.items()}

    def pri_scores(self) -> dict[Any, float]:
        """priScore (§5), by the DAG's task nodes: 1 for the task planned first down to 1/N for the last, by
        planned start."""
        starts = self.starts
        ranked = sorted(starts, key=lambda t: (starts[t], t))
        return {t: 1 - rank / len(ranked) for rank, t in enumerate(ranked)}


def build_schedule(dag: nx.DiGraph, machines: int, step: float = DEFAULT_STEP) -> DagSchedule:
    """BuildSchedule (Fig. 5): the most compact schedule over every candidate set and subset order."""
    if machines < 1:
        raise ValueError(f"machines must be at least 1, got {machines}")
    check_demands(dag)
    best: DagSchedule | None = None
    for troublesome in candidate_troublesome_sets(dag, machines, step):
        parts = split(dag, troublesome)
        placed_t = place_either_way(parts["T"], Space(machines), dag)
        for order in SUBSET_ORDERS:
            space = place_in_order(order, parts, placed_t, dag)
            if best is None or space.length < best.makespan - FIT_TOLERANCE:
                best = DagSchedule.of(space, troublesome, order)
    return best


# lower bounds (§6) --------------------------------------------------------------------------------
def stages(dag: nx.DiGraph) -> dict[object, list[str]]:
    grouped: dict[object, list[str]] = {}
    for task, data in dag.nodes(data=True):
        grouped.setdefault(data["stage"], []).append(task)
    return grouped


def critical_path(dag: nx.DiGraph, tasks: list[str] | None = None) -> float:
    """CPLen: the longest chain of task durations."""
    graph = dag.subgraph(tasks) if tasks is not None else dag
    finish: dict[str, float] = {}
    for t in nx.topological_sort(graph):
        finish[t] = graph.nodes[t]["duration"] + max((finish[p] for p in graph.predecessors(t)), default=0.0)
    return max(finish.values(), default=0.0)


def total_work(dag: nx.DiGraph, tasks: list[str] | None, machines: int) -> float:
    """TWork: the busiest resource's duration-weighted demand over the machines' capacity."""
    tasks = list(dag) if tasks is None else tasks
    dims = len(dag.nodes[tasks[0]]["demand"]) if tasks else 0
    return max(
        (sum(dag.nodes[t]["duration"] * dag.nodes[t]["demand"][r] for t in tasks) / machines for r in range(dims)),
        default=0.0,
    )


def stage_graph(dag: nx.DiGraph) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(stages(dag))
    stage = dag.nodes.data("stage")
    graph.add_edges_from({(stage[a], stage[b]) for a, b in dag.edges if stage[a] != stage[b]})
    return graph


def modified_critical_path(dag: nx.DiGraph, machines: int) -> float:
    """ModCP: along a chain of stages, one stage at its own bound and every other at its shortest task."""
    grouped, graph = stages(dag), stage_graph(dag)
    own = {s: max(total_work(dag, ts, machines), critical_path(dag, ts)) for s, ts in grouped.items()}
    shortest = {s: min(dag.nodes[t]["duration"] for t in ts) for s, ts in grouped.items()}
    sources = [s for s in graph if graph.in_degree(s) == 0]
    sinks = [s for s in graph if graph.out_degree(s) == 0]
    best = 0.0
    for a, b in itertools.product(sources, sinks):
        paths = [[a]] if a == b else nx.all_simple_paths(graph, a, b)
        for path in paths:
            base = sum(shortest[s] for s in path)
            best = max(best, max(base - shortest[s] + own[s] for s in path))
    return best


def totally_ordered_parts(dag: nx.DiGraph) -> list[list[str]]:
    """The DAG cut where every stage before a cut precedes every stage after it (§4.4)."""
    graph = stage_graph(dag)
    order = list(nx.topological_sort(graph))
    reach = {s: nx.descendants(graph, s) for s in order}
    parts, current = [], []
    for i, stage in enumerate(order):
        current.append(stage)
        later = order[i + 1 :]
        if later and all(set(later) <= reach[s] for s in current):
            parts.append(current)
            current = []
    parts.append(current)
    grouped = stages(dag)
    return [[t for s in part for t in grouped[s]] for part in parts]


@dataclass(frozen=True)
class LowerBounds:
    cp_len: float
    t_work: float
    mod_cp: float
    new_lb: float


def lower_bounds(dag: nx.DiGraph, machines: int) -> LowerBounds:
    """CPLen, TWork, ModCP and NewLB (the sum over totally ordered parts of the best of the three)."""
    new_lb = 0.0
    for part in totally_ordered_parts(dag):
        sub = dag.subgraph(part)
        new_lb += max(critical_path(sub), total_work(sub, None, machines), modified_critical_path(sub, machines))
    return LowerBounds(
        critical_path(dag), total_work(dag, None, machines), modified_critical_path(dag, machines), new_lb
    )
