"""DAG jobs shaped like TPC-H / TPC-DS queries run by Hive on Tez (the DAGPS paper's workloads, §8.1).

A benchmark is a fixed set of query templates drawn from the seed; each job picks one at random and a
size factor, as the paper's jobs are picked at random from their benchmark with input sizes chosen per
run (jobs of one template and factor are alike, so a planner may reuse one schedule for them all, as
DAGPS does for recurring jobs). A template is a query plan:

- scan stages (roots) read tables: one fact table (many tasks) and several dimension tables (a few
  tasks), keeping a share of what they read (filters and projections);
- joins take two inputs (sometimes three) in a mostly left-deep order, so the depth grows with the
  number of tables (TPC-DS queries join more tables than TPC-H ones); now and then a dimension scan
  also feeds a later join (a shared scan), which makes the plan a DAG rather than a tree;
- some joins are followed by an aggregation stage, and every plan ends with a final aggregation and
  a one-task sort;
- a stage with parents has one task per `reduce_input` of what it fetches (at most `max_tasks`).

Every stage is CPU-heavy or I/O-heavy and has 2 or 8 GB tasks, with the demands of the Tetris suite
(`tetris_suite.stage_demand`); CPU-heavy stages compute for `cpu_heavy_s` times a log-normal factor,
which gives a DAG long and short stages (the paper's runtimes range from under a second to hundreds of
seconds). The production numbers the shapes aim at (§2.3): median depth 7, in-degree of a task median 7.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Literal

from hybridbed.scheduler.model import JobSpec, StageSpec, dag_spec
from hybridbed.workloads.tetris_suite import HostBandwidth, SuiteShape, stage_demand

MB = 1_000_000
BENCHMARK_TABLES = {"tpch": (2, 5), "tpcds": (3, 8)}  # tables a query scans, fewest and most


@dataclass(frozen=True)
class DagShape:
    benchmark: Literal["tpch", "tpcds"] = "tpcds"
    templates: int = 20
    fact_tasks: int = 20  # scan tasks of the fact table at size factor 1
    reduce_input_bytes: int = 512 * MB
    max_tasks: int = 40
    size_factors: tuple[float, ...] = (0.5, 1.0, 2.0)
    compute_spread: float = 0.8  # sigma of the log-normal factor on a CPU-heavy stage's compute time
    shared_scan: float = 0.3  # chance that a template's dimension scan also feeds a later join


@dataclass(frozen=True)
class _Node:
    """A template's stage before sizing: its kind, parents, and its output per byte it takes in."""

    kind: str  # "fact", "dim", "join", "agg", "final", "sort"
    parents: tuple[int, ...]
    selectivity: float
    io_heavy: bool
    memory_gb: float
    compute_factor: float


def query_template(rng: random.Random, shape: DagShape, tasks: SuiteShape) -> list[_Node]:
    """One query plan, stages in topological order."""
    low, high = BENCHMARK_TABLES[shape.benchmark]
    n_tables = rng.randint(low, high)

    def node(kind: str, parents: tuple[int, ...], selectivity: float) -> _Node:
        return _Node(
            kind,
            parents,
            selectivity,
            rng.random() < 0.5,
            rng.choice(tasks.memory_gb),
            rng.lognormvariate(0.0, shape.compute_spread),
        )

    nodes = [node("fact", (), rng.uniform(0.2, 0.6))]
    nodes += [node("dim", (), rng.uniform(0.1, 0.5)) for _ in range(n_tables - 1)]
    waiting = list(range(1, n_tables))  # dimension scans still to join
    rng.shuffle(waiting)
    current = 0
    while waiting:
        if len(waiting) >= 2 and rng.random() < 0.25:  # bushy: join two dimensions first
            a, b = waiting.pop(), waiting.pop()
            nodes.append(node("join", (a, b), rng.uniform(0.5, 1.0)))
            waiting.insert(0, len(nodes) - 1)
            continue
        inputs = [current, waiting.pop()]
        if waiting and rng.random() < 0.2:  # a three-way join
            inputs.append(waiting.pop())
        nodes.append(node("join", tuple(inputs), rng.uniform(0.3, 1.0)))
        current = len(nodes) - 1
        if rng.random() < 0.3:
            nodes.append(node("agg", (current,), rng.uniform(0.2, 0.6)))
            current = len(nodes) - 1
    dims = [i for i, n in enumerate(nodes) if n.kind == "dim"]
    joins = [i for i, n in enumerate(nodes) if n.kind == "join"]
    if dims and joins and rng.random() < shape.shared_scan:
        dim = rng.choice(dims)
        later = [j for j in joins if j > dim and dim not in nodes[j].parents]
        if later:
            j = rng.choice(later)
            nodes[j] = replace(nodes[j], parents=nodes[j].parents + (dim,))
    nodes.append(node("final", (current,), rng.uniform(0.05, 0.2)))
    nodes.append(node("sort", (len(nodes) - 1,), 1.0))
    return nodes


def size_template(
    template: list[_Node], factor: float, shape: DagShape, tasks: SuiteShape, host: HostBandwidth, scale: float
) -> tuple[StageSpec, ...]:
    """The template's stages at a size factor, bytes at the run's scale."""
    block = max(1, int(tasks.block_bytes * scale))
    per_task_in = max(1, int(shape.reduce_input_bytes * scale))
    children: dict[int, int] = {}
    for n in template:
        for p in n.parents:
            children[p] = children.get(p, 0) + 1
    out: list[int] = []  # each stage's output bytes
    stages = []
    for i, n in enumerate(template):
        if n.kind == "fact":
            count = max(1, round(shape.fact_tasks * factor))
        elif n.kind == "dim":
            count = max(1, round(shape.fact_tasks * factor * 0.1))
        else:
            count = None
        read = count * block if count else 0
        fetched = sum(out[p] // children[p] for p in n.parents)
        if count is None:
            count = 1 if n.kind == "sort" else min(shape.max_tasks, max(1, math.ceil(fetched / per_task_in)))
        produced = int((read + fetched) * n.selectivity)
        out.append(produced)
        timing = replace(tasks, cpu_heavy_s=tasks.cpu_heavy_s * n.compute_factor)
        demand, compute_s = stage_demand(
            n.io_heavy, n.memory_gb, read // count, produced // count, read // count or fetched // count, timing, host
        )
        stages.append(StageSpec(f"{n.kind}{i}.", count, round(compute_s, 3), n.parents, read, produced, demand))
    return tuple(stages)


def dag_jobs(
    n_jobs: int,
    rng: random.Random,
    shape: DagShape,
    tasks: SuiteShape,
    host: HostBandwidth,
    scale: float,
    arrival_window_s: float = 0.0,
    queues: int = 1,
) -> list[JobSpec]:
    """`n_jobs` jobs of the benchmark, sorted by arrival (uniform in the window: a Poisson process given
    the count; 0: a batch), spread at random over `queues` job groups."""
    templates = [query_template(rng, shape, tasks) for _ in range(shape.templates)]
    jobs = []
    for i in range(n_jobs):
        t = rng.randrange(len(templates))
        factor = rng.choice(shape.size_factors)
        arrival = round(rng.uniform(0, arrival_window_s), 3) if arrival_window_s else 0.0
        stages = size_template(templates[t], factor, shape, tasks, host, scale)
        jobs.append(dag_spec(f"job{i}-q{t}x{factor:g}", arrival, stages, queue=f"q{rng.randrange(queues)}"))
    return sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
