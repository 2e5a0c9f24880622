"""MR-POTS (Zhang et al., "Multi-resource partial-ordered task scheduling in cloud computing"): DRP picks
the subtasks, MUA shares the resources out among them; and the baselines of its evaluation (§IV).

The paper schedules one resource pool in slotted time. Its adaptation to a cluster, here: every host is
a pool. Resources are the rates a host shares out (cores, disk reads, disk writes, network in; memory must
fit, as in YARN, and is not shared out), a task's demand being the rates at which it runs at full speed.
A subtask is a task; the tasks of one stage are alike, so DRP weighs stages.

- DRP (Alg. 2, `planning.mrpots.drp_pick`), cluster-wide: a stage's DRP is when it became ready plus its
  dominant share times its duration (Eq. 10: virtual time, first come first served, shortest first); a
  stage not ready yet gets the largest of its parents' DRPs plus its own (Eqs. 11-12); the look-ahead
  rule (one slot: one heartbeat) and the unlocking rule. Each host runs at most one task of each
  dominant-resource group at a time, as the pool serves each group serially: a host takes DRP's pick for
  a group it has free.
- MUA (Eq. 9, `planning.mrpots.mua`) per host, over its running tasks and the one it is about to start:
  the fractions of their demands that use the host most, every time that set changes; they are applied
  live (cgroup quota, disk pacing, the network rate at the receiving side) and a task starts at its
  fraction. The sprint period is a device of slotted time (finishing a subtask in what is left of a slot);
  here a task that ends frees its share at once and MUA runs again.

Baselines, on the same hosts:
- `fifo-lm` (task serialisation): one job at a time, first come first served; a host runs one task at a
  time, at its full demand (fed its dominant resource);
- `drfq`: every task that fits a container starts, jobs in order of their dominant share (DRF), and the
  tasks on a host share its rates by dominant-resource fair queuing (equal dominant shares, progressive
  filling, none beyond its demand);
- `cpm` (critical-path method): the stage with the longest path of durations to its job's end first; a
  task starts where its full demand fits every rate the host has left (no oversharing).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pydantic import Field

from hybridbed.policies.planning.mrpots import Candidate, dominant, drp_pick, mua
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.dag_paths import stage_critical_paths
from hybridbed.scheduler.model import Job, Resources, Task, TaskState
from hybridbed.scheduler.policy import Policy, PolicyParams, Share
from hybridbed.scheduler.transfers import expected_duration_s

SHARED = ("cores", "disk_read_mbps", "disk_write_mbps", "net_in_mbps")  # the rates a host shares out
MIN_FRACTION = 0.01  # a task keeps at least this much of its demand (a cgroup quota has a floor too)


@functools.lru_cache(maxsize=4096)  # few distinct (demand, capacity) pairs, asked at every decision
def rate_shares(demand: Resources, capacity: Resources) -> tuple[float, ...]:
    """The demand's share of the host's capacity in each shared rate (0 where the host does not model it)."""
    return tuple(getattr(demand, r) / getattr(capacity, r) if getattr(capacity, r) > 0 else 0.0 for r in SHARED)


@dataclass
class HostPlan:
    """This round's plan for a host: the tasks to start there and every task's fraction of its demand."""

    starts: list[Task]
    fractions: dict[str, float]


class HostPoolPolicy(Policy):
    """A policy that treats each host as a pool: each round it picks the tasks to start on every host, then
    shares the host's rates among those and the running ones; `shares` applies the new fractions (lower
    ones first, so every step fits) and `next_task` / `launch_share` start the picked tasks at theirs."""

    default_slowstart = 1.0

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self._plans: dict[str, HostPlan] = {}
        self._fraction: dict[str, float] = {}  # running task -> its fraction of its demand now
        self._claimed: set[str] = set()  # tasks planned to start on some host this round
        self._shared_at: dict[str, int] = {}  # host -> its `changes` when its running tasks were last shared
        self._with_room: set[str] = set()  # live hosts with a free container, as of the last round

    def starts(self, host: HostState, cluster: ClusterState) -> list[Task]:
        """The tasks to start on the host this round (pending, runnable, fitting its memory and containers,
        not claimed by another host: see `unclaimed`)."""
        raise NotImplementedError

    def unclaimed(self, cluster: ClusterState, job: Job, stage: int, host: HostState) -> Task | None:
        """The stage's pending task to start on the host (the best located one) that no host has planned yet."""
        best = cluster.best_in_stage(job, stage, host)[0]
        if best.task_id not in self._claimed:
            return best
        return next(
            (t for t in cluster.pending[job.job_id].stages[stage].tasks.values() if t.task_id not in self._claimed),
            None,
        )

    def fractions(self, tasks: list[Task], host: HostState) -> list[float]:
        """Each task's fraction of its demand, for these tasks sharing the host."""
        return [1.0] * len(tasks)

    def shares(self, cluster: ClusterState) -> list[Share]:
        lower: list[Share] = []
        higher: list[Share] = []
        self._plans, self._claimed = {}, set()
        touched = cluster.take_changed_hosts()
        for name in touched:
            if cluster.hosts[name].free_slots > 0:
                self._with_room.add(name)
            else:
                self._with_room.discard(name)
        # a host unchanged and full keeps its fractions: only these can have anything to do, in the cluster's order
        for name in sorted(touched | self._with_room, key=cluster.host_order.__getitem__):
            host = cluster.hosts[name]
            if not host.alive:
                continue
            starts = self.starts(host, cluster) if host.free_slots > 0 else []
            if not starts and self._shared_at.get(host.name) == host.changes:
                continue  # the same tasks as when they were last shared: the same fractions
            running = [t for t in host.running.values() if t.state is TaskState.RUNNING]
            self._claimed.update(t.task_id for t in starts)
            if not running and not starts:
                self._shared_at[host.name] = host.changes
                continue
            fractions = dict(zip([t.task_id for t in running + starts], self.fractions(running + starts, host)))
            self._plans[host.name] = HostPlan(starts, fractions)
            changed = False
            for task in running:
                now, new = self._fraction.get(task.task_id, 1.0), fractions[task.task_id]
                if abs(new - now) > 1e-6:
                    (lower if new < now else higher).append(Share.scaled(task, new))
                    self._fraction[task.task_id] = new
                    changed = True
            if not starts and not changed:
                self._shared_at[host.name] = host.changes
        return lower + higher

    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        plan = self._plans.get(host.name)
        while plan and plan.starts:
            task = plan.starts.pop(0)
            if task.state is TaskState.PENDING and host.can_run(task, self._launch_allocation(task, plan)):
                self._fraction[task.task_id] = plan.fractions[task.task_id]
                return task
        return None

    def launch_share(self, task: Task, host: HostState, cluster: ClusterState) -> Resources | None:
        return self._launch_allocation(task, self._plans[host.name])

    @staticmethod
    def _launch_allocation(task: Task, plan: HostPlan) -> Resources:
        return Share.scaled(task, plan.fractions[task.task_id]).allocation

    def _forget_finished(self, cluster: ClusterState) -> None:
        """Drop the fractions of tasks no longer running (their jobs' bookkeeping is the core's)."""
        self._fraction = {
            k: f for k, f in self._fraction.items() if any(k in h.running for h in cluster.hosts.values())
        }

    def job_arrived(self, job: Job, cluster: ClusterState) -> None:
        self._forget_finished(cluster)


def candidates_fitting(host: HostState, tasks: list[Task | None]) -> list[Task]:
    """Those of `tasks` whose memory fits the host now, each once, in order, one container each."""
    chosen, memory, slots = [], host.free.memory_mb, host.free_slots
    for task in tasks:
        if task is not None and slots > 0 and task.demand.memory_mb <= memory + 1e-9 and task not in chosen:
            chosen.append(task)
            memory -= task.demand.memory_mb
            slots -= 1
    return chosen


@dataclass(frozen=True)
class DrpStage:
    """A stage with pending tasks as DRP sees it, both ways it can be offered (one of its tasks may start
    now or not), so that a decision only picks one."""

    runnable: bool  # released and of a job that may start tasks
    waiting: dict[str, Task]  # its pending tasks (the live dict: claims are checked against it)
    eligible: Candidate
    waiting_only: Candidate


class MrPotsParams(PolicyParams):
    lookahead_s: float = Field(
        default=1.0, ge=0, description="DRP's look-ahead rule (Alg. 2): one slot, here one heartbeat"
    )


class MrPotsPolicy(HostPoolPolicy):
    name = "mrpots"
    summary = "MR-POTS: DRP picks one task per dominant resource on each host, MUA shares the host's rates"

    Params = MrPotsParams
    params: MrPotsParams

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self._stage_weights: dict[tuple[str, Resources], list[tuple[int, float, tuple]]] = {}
        self._drp_stages: dict[str, tuple[tuple, list[DrpStage]]] = {}

    def group(self, task: Task, capacity: Resources) -> int:
        return dominant(rate_shares(task.demand, capacity))

    def starts(self, host: HostState, cluster: ClusterState) -> list[Task]:
        busy = {self.group(t, host.capacity) for t in host.running.values()}
        picks = []
        for pick in drp_pick(self._candidates(cluster, host.capacity), self.params.lookahead_s):
            job, stage = pick.key
            if pick.group not in busy:
                picks.append(self.unclaimed(cluster, cluster.jobs[job], stage, host))
                busy.add(pick.group)
        return candidates_fitting(host, picks)

    def _candidates(self, cluster: ClusterState, capacity: Resources) -> list[Candidate]:
        """Every stage with pending tasks of every job (eligible where one of them may start and is not
        claimed by another host this round)."""
        found = []
        claimed = self._claimed
        for job in cluster.jobs.values():
            for stage in self._stages(job, cluster, capacity):
                free = stage.runnable and (not claimed or any(k not in claimed for k in stage.waiting))
                found.append(stage.eligible if free else stage.waiting_only)
        return found

    def _stages(self, job: Job, cluster: ClusterState, capacity: Resources) -> list[DrpStage]:
        """The job's stages with pending tasks as DRP weighs them, worked out again only when its pending or
        finished tasks, the readiness of its stages or whether it may start anything changed."""
        pending = cluster.pending[job.job_id]
        launchable = job.job_id in cluster.launchable
        state = (pending.revision, tuple(job.stage_done), tuple(job.stage_ready_s), launchable, capacity)
        cached = self._drp_stages.get(job.job_id)
        if cached is not None and cached[0] == state:
            return cached[1]
        if len(self._drp_stages) > 4 * len(cluster.jobs) + 64:  # drop finished jobs now and then
            self._drp_stages = {j: v for j, v in self._drp_stages.items() if j in cluster.jobs}
        runnable = set(cluster.runnable_stages(job)) if launchable else set()
        drp: dict[int, float] = {}
        stages = []
        for i, (stage, (group, length, successors)) in enumerate(zip(job.stages, self._weights(job, capacity))):
            ready = job.stage_ready_s[i]
            drp[i] = (ready if ready is not None else max((drp[p] for p in stage.parents), default=0.0)) + length
            waiting = pending.stages[i].tasks if i in pending.stages else {}
            if waiting:
                key = (job.job_id, i)
                stages.append(
                    DrpStage(
                        i in runnable,
                        waiting,
                        Candidate(key, group, drp[i], True, successors),
                        Candidate(key, group, drp[i], False, successors),
                    )
                )
        self._drp_stages[job.job_id] = (state, stages)
        return stages

    def _weights(self, job: Job, capacity: Resources) -> list[tuple[int, float, tuple]]:
        """Per stage of the job, what DRP weighs and does not change while the job runs: its dominant
        group, its dominant share times its duration (Eq. 10's length) and its successors."""
        key = (job.job_id, capacity)
        if key not in self._stage_weights:
            if len(self._stage_weights) > 4096:  # start afresh now and then, so finished jobs do not pile up
                self._stage_weights.clear()
            weights = []
            for stage in job.stages:
                task = stage.tasks[0]  # a stage's tasks are alike
                shares = rate_shares(task.demand, capacity)
                successors = tuple((job.job_id, c) for c in stage.children)
                weights.append((dominant(shares), max(shares) * expected_duration_s(task), successors))
            self._stage_weights[key] = weights
        return self._stage_weights[key]

    def fractions(self, tasks: list[Task], host: HostState) -> list[float]:
        return mua([rate_shares(t.demand, host.capacity) for t in tasks], MIN_FRACTION)


class FifoLmPolicy(HostPoolPolicy):
    name = "fifo-lm"
    summary = "FIFO-LM (task serialisation): one job at a time, one task per host, at full demand"

    def starts(self, host: HostState, cluster: ClusterState) -> list[Task]:
        if host.running or not cluster.jobs:
            return []
        oldest = min(cluster.jobs.values(), key=lambda j: (j.spec.arrival_s, j.job_id))
        if oldest.job_id not in cluster.launchable:
            return []
        return candidates_fitting(
            host,
            [
                next(
                    filter(None, (self.unclaimed(cluster, oldest, s, host) for s in cluster.runnable_stages(oldest))),
                    None,
                )
            ],
        )


class DrfqPolicy(HostPoolPolicy):
    name = "drfq"
    summary = "DRFQ: every task that fits starts, jobs by dominant share; hosts share rates by DRF"

    def starts(self, host: HostState, cluster: ClusterState) -> list[Task]:
        for job in sorted(cluster.launchable.values(), key=lambda j: (cluster.dominant_share(j), j.spec.arrival_s)):
            for stage in cluster.runnable_stages(job):
                if fitting := candidates_fitting(host, [self.unclaimed(cluster, job, stage, host)]):
                    return fitting  # one per round: the next round's DRF order counts it
        return []

    def fractions(self, tasks: list[Task], host: HostState) -> list[float]:
        """Progressive filling: the dominant shares of the tasks still growing rise alike until a rate one
        of them uses runs out or one has its whole demand; then the others go on."""
        shares = [rate_shares(t.demand, host.capacity) for t in tasks]
        full = [max(s) for s in shares]  # each task's dominant share at its whole demand
        per_level = [[x / f if f > 0 else 0.0 for x in s] for s, f in zip(shares, full)]
        level = [MIN_FRACTION * f for f in full]  # everyone starts from the floor
        used = [sum(level[i] * per_level[i][r] for i in range(len(tasks))) for r in range(len(SHARED))]
        growing = {i for i in range(len(tasks)) if full[i] > 0}
        while growing:
            load = [sum(per_level[i][r] for i in growing) for r in range(len(SHARED))]
            step = max(
                0.0,
                min(
                    [(1.0 - used[r]) / load[r] for r in range(len(SHARED)) if load[r] > 1e-12]
                    + [full[i] - level[i] for i in growing]
                ),
            )
            for i in growing:
                level[i] += step
                used = [u + step * x for u, x in zip(used, per_level[i])]
            out = {r for r in range(len(SHARED)) if used[r] >= 1.0 - 1e-9}
            growing = {i for i in growing if level[i] < full[i] - 1e-9 and not any(per_level[i][r] > 0 for r in out)}
        return [level[i] / full[i] if full[i] > 0 else 1.0 for i in range(len(tasks))]


class CpmPolicy(HostPoolPolicy):
    name = "cpm"
    summary = "CPM: the stage with the longest path to its job's end first, full demands that fit"

    def __init__(self) -> None:
        super().__init__()
        self._paths: dict[str, list[float]] = {}

    def job_arrived(self, job: Job, cluster: ClusterState) -> None:
        super().job_arrived(job, cluster)
        self._paths = {j: p for j, p in self._paths.items() if j in cluster.jobs}
        self._paths[job.job_id] = stage_critical_paths(job)

    def starts(self, host: HostState, cluster: ClusterState) -> list[Task]:
        free = list(rate_shares(host.free, host.capacity))
        cores, memory, slots = host.free.cores, host.free.memory_mb, host.free_slots
        ranked = sorted(
            (
                (self._paths[job.job_id][s], job.spec.arrival_s, job.job_id, s)
                for job in cluster.launchable.values()
                for s in cluster.runnable_stages(job)
            ),
            reverse=True,
        )
        chosen: list[Task] = []
        for _, _, job_id, stage in ranked:
            if slots <= 0:
                break
            for task in cluster.pending[job_id].stages[stage].tasks.values():
                if task.task_id in self._claimed or task in chosen:
                    continue
                need = rate_shares(task.demand, host.capacity)
                if (
                    slots <= 0
                    or task.demand.cores > cores + 1e-9
                    or task.demand.memory_mb > memory + 1e-9
                    or any(n > f + 1e-9 for n, f in zip(need, free))
                ):
                    break  # a stage's tasks are alike: the next stage
                chosen.append(task)
                free = [f - n for f, n in zip(free, need)]
                cores, memory, slots = cores - task.demand.cores, memory - task.demand.memory_mb, slots - 1
        return chosen
