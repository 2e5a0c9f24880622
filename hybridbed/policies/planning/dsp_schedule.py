"""DSP's offline step (§III, Eqs. 3-11): a target host and a start time for every task, minimising the
makespan under the dependencies and the deadlines, solved once per unit period.

The paper's model is non-linear (products of assignment and start-time variables, max and min in the
constraints) and holds one task per node. Here it is linearised as a time-indexed MILP over the hosts'
cores and containers, which also lets a host run several tasks at once:

- n[g, b]: how many tasks of stage g start in time bucket b (bucket length Δ = the list schedule's span
  over `buckets`, a task lasting its duration / Δ buckets, rounded, at least one); each task starts once
  (Eqs. 9-10);
- in every bucket the tasks running fit the cluster's cores and containers, those already running counted
  until their expected end (the disjunctive Eqs. 5 and 8 become a capacity sum). The node index is
  relaxed, as the paper suggests: the MILP's start times give the order, and the list schedule in that
  order assigns each task its host and its start (the buckets' rounding and the cluster-wide sum, which
  does not see how cores are split among hosts, stay out of the final times);
- a task starts after every task of the groups (stages) it depends on ends (Eq. 7), and not before it may
  (its parents already running); deadlines (Eq. 6) are soft: lateness is minimised with the makespan,
  so a period whose deadlines cannot all be met still gets a schedule; tasks may also go to an overflow
  bucket past the horizon at a high cost, so the model always has a solution;
- objective: makespan + total lateness per job + 0.001 × the start times (no task later than it need be).

scipy's HiGHS solves it with a time limit; when it finds no schedule in time, or its schedule is worse than
the list schedule it started from (greedy, earliest start first in the caller's order), the list schedule
stands. A time-indexed model with a host index (z[t, h, b]) was tried first: HiGHS found no feasible
point for 66 tasks on 4 hosts in 20 s; the relaxed one, per stage, solves such a period in about a second.
The paper's preemption-overhead term (N^p · (t_r + σ)) is left out: the number of preemptions a task will
see is not known when it is planned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from hybridbed.policies.planning.resource_time import UsageTimeline

START_WEIGHT = 1e-3


@dataclass(frozen=True)
class PlanTask:
    key: str
    job: str
    group: str  # the tasks of a group (one stage) share what they depend on
    after: tuple[str, ...]  # groups whose tasks must all end before this one starts
    duration_s: float
    cores: float
    ready_s: float  # it may not start before this (now, or the expected end of parents still running)
    deadline_s: float  # its job's


@dataclass(frozen=True)
class PlanHost:
    name: str
    cores: float
    slots: int
    busy: tuple[tuple[float, float], ...] = ()  # tasks already running there: (expected end, cores)


@dataclass(frozen=True)
class Schedule:
    starts: dict[str, tuple[str, float]]  # task -> (host, start)
    solver: str  # "milp", or "list" when the MILP found nothing better in time
    objective: float
    list_objective: float
    milp_objective: float | None  # the list schedule in the MILP's order; None: no MILP solution in time


def objective(tasks: list[PlanTask], starts: dict[str, tuple[str, float]], now: float) -> float:
    """Makespan (from now) plus every job's lateness, in continuous time."""
    ends = {t.key: starts[t.key][1] + t.duration_s for t in tasks}
    late: dict[str, float] = {}
    for t in tasks:
        late[t.job] = max(late.get(t.job, 0.0), ends[t.key] - t.deadline_s)
    return max(ends.values(), default=now) - now + sum(max(0.0, v) for v in late.values())


def _host_timeline(host: PlanHost, now: float) -> UsageTimeline:
    """What one host runs when, in cores and containers, its running tasks until their expected ends."""
    timeline = UsageTimeline(capacity=(host.cores, host.slots))
    for end, cores in host.busy:
        if end > now:
            timeline.add(now, end, (cores, 1))
    return timeline


def list_schedule(tasks: list[PlanTask], hosts: list[PlanHost], now: float) -> dict[str, tuple[str, float]]:
    """Greedy: each task in the given (topological) order at the earliest time and host it fits, after the
    tasks of the groups it depends on."""
    timelines = [_host_timeline(h, now) for h in hosts]
    large_enough: dict[float, list[int]] = {}  # cores -> the hosts that can hold such a task at all, in order
    group_end: dict[str, float] = {}
    starts = {}
    for task in tasks:
        ready = max([task.ready_s, now] + [group_end.get(g, now) for g in task.after])
        demand = (task.cores, 1)
        if task.cores not in large_enough:
            large_enough[task.cores] = [i for i, t in enumerate(timelines) if t.fits(demand, None)]
        start, line = math.inf, 0
        for i in large_enough[task.cores]:  # the earliest start, the first host on a tie
            at = timelines[i].earliest_fit(task.duration_s, demand, ready, before=start)
            if at < start:
                start, line = at, i
                if at <= ready:
                    break  # no host starts it sooner
        if math.isinf(start):
            raise ValueError(f"task {task.key} ({task.cores:g} cores) fits no host")
        timelines[line].add(start, start + task.duration_s, demand)
        starts[task.key] = (hosts[line].name, start)
        group_end[task.group] = max(group_end.get(task.group, now), start + task.duration_s)
    return starts


def plan(
    tasks: list[PlanTask], hosts: list[PlanHost], now: float, time_limit_s: float = 2.0, buckets: int = 24
) -> Schedule:
    """The MILP's schedule, or the list schedule when the MILP has nothing better within the time limit."""
    greedy = list_schedule(tasks, hosts, now)
    greedy_value = objective(tasks, greedy, now)
    if not tasks or time_limit_s <= 0:
        return Schedule(greedy, "list", greedy_value, greedy_value, None)
    span = max(greedy[t.key][1] + t.duration_s for t in tasks) - now
    times = _solve_milp(tasks, hosts, now, max(span, 1e-3) / buckets, buckets, time_limit_s)
    if times is not None:  # tasks the MILP left past its horizon go after, in the caller's order
        position = {t.key: i for i, t in enumerate(tasks)}
        order = sorted(tasks, key=lambda t: (t.key not in times, times.get(t.key, 0.0), position[t.key]))
        solved = list_schedule(order, hosts, now)
        value = objective(tasks, solved, now)
        if value < greedy_value - 1e-9:
            return Schedule(solved, "milp", value, greedy_value, value)
        return Schedule(greedy, "list", greedy_value, greedy_value, value)
    return Schedule(greedy, "list", greedy_value, greedy_value, None)


def _solve_milp(
    tasks: list[PlanTask], hosts: list[PlanHost], now: float, step: float, buckets: int, time_limit_s: float
) -> dict[str, float] | None:
    """Start times from the time-indexed MILP over the cluster's cores and containers together (the node
    index relaxed, as the paper suggests; hosts are then assigned first fit in start order). The tasks of
    a group are alike, so the variables count a group's starts per bucket: n[g, b] (integer), with u[g, b]
    (binary) marking the buckets where some start, for the group's end."""
    groups: dict[str, list[PlanTask]] = {}
    for task in tasks:
        groups.setdefault(task.group, []).append(task)
    names = list(groups)
    first_of = {g: groups[g][0] for g in names}
    lengths = {g: max(1, round(max(t.duration_s for t in groups[g]) / step)) for g in names}
    horizon = 2 * buckets + max(lengths.values())  # room beyond the list schedule's span: rounding takes some
    columns: list[tuple[str, int]] = []  # (group, bucket) of each n (and of the u right after all n)
    for g in names:
        ready = max(t.ready_s for t in groups[g])
        first = max(0, math.ceil((ready - now) / step - 1e-9))
        columns += [(g, b) for b in range(first, horizon - lengths[g] + 1)] + [(g, horizon)]  # last: overflow
    n_n = len(columns)
    makespan = 2 * n_n
    jobs = sorted({t.job for t in tasks})
    lateness = {j: makespan + 1 + k for k, j in enumerate(jobs)}
    n = makespan + 1 + len(jobs)

    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lower: list[float] = []
    upper: list[float] = []

    def row(entries: list[tuple[int, float]], lo: float, hi: float) -> None:
        for c, v in entries:
            rows.append(len(lower))
            cols.append(c)
            vals.append(v)
        lower.append(lo)
        upper.append(hi)

    by_group: dict[str, list[int]] = {g: [] for g in names}
    for c, (g, _) in enumerate(columns):
        by_group[g].append(c)
    for g in names:  # every task of the group starts once
        row([(c, 1.0) for c in by_group[g]], len(groups[g]), len(groups[g]))
    cover: dict[int, list[int]] = {}  # bucket -> the n that run then
    for c, (g, b) in enumerate(columns):
        for k in range(b, b + lengths[g]) if b < horizon else ():
            cover.setdefault(k, []).append(c)
    for k, cs in cover.items():  # cores and containers, less what runs already
        moment = now + k * step
        busy = [cores for h in hosts for end, cores in h.busy if end > moment]
        row([(c, first_of[columns[c][0]].cores) for c in cs], -np.inf, sum(h.cores for h in hosts) - sum(busy))
        row([(c, 1.0) for c in cs], -np.inf, sum(h.slots for h in hosts) - len(busy))
    for c, (g, b) in enumerate(columns):
        row([(c, 1.0), (n_n + c, -len(groups[g]))], -np.inf, 0.0)  # n > 0 only where u = 1
        end = (b + lengths[g]) * step
        row([(n_n + c, end), (makespan, -1.0)], -np.inf, 0.0)
        job = first_of[g].job
        row([(n_n + c, end), (lateness[job], -1.0)], -np.inf, first_of[g].deadline_s - now)
        for parent in first_of[g].after if b < horizon else ():
            if parent in groups:  # a start at b only once every task of the parent group has ended by b
                ended = [(p, -1.0) for p in by_group[parent] if columns[p][1] + lengths[parent] <= b]
                row([(n_n + c, len(groups[parent]))] + ended, -np.inf, 0.0)

    cost = np.zeros(n)
    for c, (_, b) in enumerate(columns):
        cost[c] = (START_WEIGHT * b if b < horizon else b) * step  # overflow: as if it delayed everything
    cost[makespan] = 1.0
    for j in jobs:
        cost[lateness[j]] = 1.0
    integrality = np.zeros(n)
    integrality[: 2 * n_n] = 1
    upper_bounds = np.full(n, np.inf)
    for c, (g, _) in enumerate(columns):
        upper_bounds[c] = len(groups[g])
        upper_bounds[n_n + c] = 1.0
    matrix = coo_matrix((vals, (rows, cols)), shape=(len(lower), n)).tocsr()
    result = milp(
        cost,
        constraints=LinearConstraint(matrix, lower, upper),
        integrality=integrality,
        bounds=Bounds(np.zeros(n), upper_bounds),
        options={"time_limit": time_limit_s, "disp": False},
    )
    if result.x is None:
        return None
    starts: dict[str, float] = {}
    for g in names:
        waiting = iter(groups[g])
        for c in by_group[g]:
            if columns[c][1] < horizon:
                for _ in range(int(round(result.x[c]))):
                    starts[next(waiting).key] = now + columns[c][1] * step
    return starts
