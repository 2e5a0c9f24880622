"""What a policy sees: hosts with their free containers and resources, the active jobs, and the rates
of the network they run on.

The same state is kept by both backends (emulation and simulation); policies read it and never change it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hybridbed.scheduler.model import Allocation, Job, Locality, Resources, StageKind, Task
from hybridbed.scheduler.pending import PendingTasks
from hybridbed.scheduler.transfers import placed_demand, remote_read_load


@dataclass(frozen=True)
class NetworkView:
    """The rates and OCS rules a planner may assume, in bytes/s and bytes at the run's scale."""

    eps_uplink_Bps: float  # one ToR's uplink to the EPS core
    ocs_Bps: float  # one OCS circuit; 0 when the network has no OCS
    elephant_bytes: float  # rack-pair demand below this stays on the EPS
    size_scale: float = 1.0  # workload bytes at the run's scale = full-scale bytes x size_scale

    def __post_init__(self) -> None:
        if self.eps_uplink_Bps <= 0 or self.ocs_Bps < 0 or self.elephant_bytes < 0:
            raise ValueError(f"invalid network rates {self}")


@dataclass
class HostState:
    name: str
    rack: int
    slots: int
    capacity: Resources
    running: dict[str, Task] = field(default_factory=dict)  # changed only through start/stop/clear
    alive: bool = True
    # disk-read and network-out bandwidth held for tasks elsewhere that read their input from this host
    serving: dict[str, Resources] = field(default_factory=dict)
    # the running tasks' demands and what it serves, summed, and what is left: changed only through
    # start/stop/hold/release/clear (policies read `free` at every decision)
    used: Resources = field(default=Resources(0, 0))
    free: Resources = field(init=False)
    # the resource tracker's last report (Tetris §4.1): disk and network bandwidth in use on the host, when
    # it was taken and over what window (None: no report yet)
    reported: Resources | None = None
    reported_s: float = 0.0
    report_window_s: float = 0.0
    # allotments ended since that report (tasks done, remote reads served), whose use it still shows
    released: Resources = field(default=Resources(0, 0))
    # counts every change of what runs or is held here, so that a policy can tell a host unchanged since
    # it last looked without comparing its tasks
    changes: int = 0
    # where the cluster collects the hosts changed since its policy last took them (ClusterState sets it)
    changed_into: set[str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.free = self.capacity - self.used

    def _use(self, used: Resources) -> None:
        self.used = used
        self.free = self.capacity - used
        self._changed()

    def _changed(self) -> None:
        self.changes += 1
        if self.changed_into is not None:
            self.changed_into.add(self.name)

    def resize(self, slots: int) -> None:
        """The host now offers `slots` containers."""
        self.slots = slots
        self._changed()

    @property
    def free_slots(self) -> int:
        return self.slots - len(self.running) if self.alive else 0

    def can_run(self, task: Task, allocation: Resources | None = None, cores: bool = True) -> bool:
        """A free container with room for the task's cores and memory (its demand, or the share it is to start
        with; disk and network may be over-allocated, as YARN does; a packing policy checks them itself).
        `cores=False`: memory alone, the cores over-committed (a policy that allocates memory slots only)."""
        return self.free_slots > 0 and (allocation or task.demand).allocatable_in(self.free, cores)

    def start(self, task: Task) -> None:
        self.running[task.task_id] = task
        self._use(self.used + task.allocation)

    def stop(self, task_id: str) -> None:
        task = self.running.pop(task_id, None)
        if task is not None:
            self._use(self.used - task.allocation)
            if task.started_s is not None and task.started_s <= self.reported_s:
                self.released = self.released + task.allocation

    def room_for(self, task: Task) -> Resources:
        """What the host's capacity leaves for a task running here beside its other tasks (what it serves
        to tasks elsewhere not counted: that is over-allocated as at a launch)."""
        others = self.used - task.allocation
        for load in self.serving.values():
            others = others - load
        return self.capacity - others

    def reallocate(self, task: Task, allocation: Resources) -> None:
        """A task here now holds `allocation` instead of what it held (suspended, resumed, a new share)."""
        self._use(self.used - task.allocation + allocation)

    def report_usage(self, usage: Resources, now: float, window_s: float) -> None:
        """The host's disk and network bandwidth in use now (its cores and memory fields are ignored), as
        measured over the last `window_s`."""
        self.reported, self.reported_s, self.report_window_s = usage, now, window_s
        self.released = Resources(0, 0)

    def tracked_free(self) -> Resources:
        """Free resources as Tetris's resource tracker sees them (§4.1): cores and memory as allocated (YARN
        enforces them); disk and network bandwidth as the last report measured them in use, plus the
        allotments of the tasks started within its window or after it, whose use it could not show in full
        (in place of the paper's ramp-up allowance), less the allotments ended since (a node manager reports
        a finished container with the usage that no longer has it). A task that leaves part of its
        allotment unused, such as a reducer's disk-write rate while it fetches, leaves that part to others."""
        if self.reported is None:
            return self.free
        fresh = Resources(0, 0)
        since = self.reported_s - self.report_window_s
        for task in self.running.values():
            if task.started_s is not None and task.started_s > since:
                fresh = fresh + task.allocation
        reported, released, cap = self.reported, self.released, self.capacity

        def free(field: str) -> float:
            still_in_use = max(0.0, getattr(reported, field) - getattr(released, field))
            return getattr(cap, field) - still_in_use - getattr(fresh, field)

        return Resources(
            self.free.cores,
            self.free.memory_mb,
            *(free(f) for f in ("disk_read_mbps", "disk_write_mbps", "net_in_mbps", "net_out_mbps")),
        )

    def hold(self, task_id: str, load: Resources) -> None:
        self.serving[task_id] = load
        self._use(self.used + load)

    def release(self, task_id: str) -> None:
        load = self.serving.pop(task_id, None)
        if load is not None:
            self._use(self.used - load)
            self.released = self.released + load

    def clear(self) -> None:
        self.running.clear()
        self.serving.clear()
        self._use(Resources(0, 0))
        self.reported, self.released = None, Resources(0, 0)


@dataclass(frozen=True, slots=True)
class StageOffer:
    """A stage of a job with a task a policy may start now, and what that task takes as placed: on a host
    holding its input block (`local`) or anywhere else (`remote`). A stage with parents fetches from wherever
    they ran, wherever it runs: one demand, never a remote read."""

    stage: int
    finished: int  # of its tasks
    tasks: int
    pending: int  # of its tasks: `tasks - pending` have started (the next to start is that many-th)
    local: Resources
    remote: Resources
    by_host: dict[str, dict[str, Task]] | None  # a root stage's pending tasks by the hosts holding their blocks

    def placed(self, host: str) -> tuple[Resources, bool]:
        """The demand on `host` of the task `ClusterState.best_in_stage` gives, and whether it reads its
        block from another host, without picking the task."""
        if self.by_host is None or self.by_host.get(host):
            return self.local, False
        return self.remote, True


@dataclass
class ClusterState:
    racks: int
    hosts: dict[str, HostState]
    slowstart: float
    jobs: dict[str, Job] = field(default_factory=dict)  # arrived and not finished
    pending: dict[str, PendingTasks] = field(default_factory=dict)  # per job in `jobs`
    # jobs of `jobs` with a task a policy may start (a pending root task, or one of a released stage):
    # kept by the scheduler core, so that a policy looks only at these however many jobs wait
    launchable: dict[str, Job] = field(default_factory=dict)
    launchable_changes: int = 0  # counts the changes of which jobs are launchable: a policy's view of them is stale
    finished: set[str] = field(default_factory=set)  # ids of the jobs that are done
    # suspended tasks (still on their hosts) -> what each held before: kept by the scheduler core
    suspended: dict[str, Resources] = field(default_factory=dict)
    now: float = 0.0
    network: NetworkView | None = None  # planners that model the network need it
    precedence: bool = True  # False: a policy may start a stage's tasks before their parents are done
    rack_of: dict[str, int] = field(init=False)  # hosts keep their rack for the whole run
    rack_hosts: dict[int, list[str]] = field(init=False)  # every host of each rack, live or not
    _dead_racks: set[int] = field(init=False)
    # the live hosts, and per rack: worked out when a host is lost, not at every job's arrival (6,000 hosts at 10x)
    _live: frozenset[str] = field(init=False)
    _live_by_rack: dict[int, tuple[str, ...]] = field(init=False)
    _capacity: Resources = field(init=False)
    _released: dict[str, tuple[tuple, list[int]]] = field(init=False, default_factory=dict)
    _offers: dict[str, tuple[tuple, list[StageOffer]]] = field(init=False, default_factory=dict)
    _alike: dict[Resources, Resources] = field(init=False)
    host_order: dict[str, int] = field(init=False)  # each host's place in `hosts`
    _changed_hosts: set[str] = field(init=False)  # hosts changed since the policy last took them; at first, all

    def __post_init__(self) -> None:
        self._changed_hosts = set(self.hosts)
        # hosts alike share one capacity object, and stages alike one demand object (`_alike`), so that the
        # policies' caches keyed by them compare by identity, not field by field, at every decision
        self._alike = {}
        for host in self.hosts.values():
            host.capacity = self._alike.setdefault(host.capacity, host.capacity)
            host.changed_into = self._changed_hosts
        self.host_order = {name: i for i, name in enumerate(self.hosts)}
        self.rack_of = {name: host.rack for name, host in self.hosts.items()}
        self.rack_hosts = {r: [] for r in range(self.racks)}
        for name, host in self.hosts.items():
            self.rack_hosts[host.rack].append(name)
        self._live_hosts_changed()

    def _live_hosts_changed(self) -> None:
        """Work out again what depends on which hosts live (at first, and when one is lost)."""
        self._live = frozenset(name for name, host in self.hosts.items() if host.alive)
        self._live_by_rack = {r: tuple(h for h in hosts if h in self._live) for r, hosts in self.rack_hosts.items()}
        self._dead_racks = {r for r, hosts in self._live_by_rack.items() if not hosts}
        self._capacity = self._live_capacity()

    def _live_capacity(self) -> Resources:
        """The live hosts' resources together (the denominator of a job's dominant share)."""
        total = Resources(0, 0)
        for host in self.hosts.values():
            if host.alive:
                total = total + host.capacity
        return total

    def dominant_share(self, job: Job) -> float:
        """DRF's dominant share of the job's running tasks, over cores and memory."""
        return self.dominant_fraction(job.allocated)

    def dominant_fraction(self, demand: Resources) -> float:
        """The largest share of the live cluster's cores or memory that `demand` is."""
        return max(
            demand.cores / self._capacity.cores if self._capacity.cores else 0.0,
            demand.memory_mb / self._capacity.memory_mb if self._capacity.memory_mb else 0.0,
        )

    def containers_per_rack(self) -> int:
        """Containers of the fullest rack: the planners' uniform-rack view of the cluster."""
        per_rack = [0] * self.racks
        for host in self.hosts.values():
            per_rack[host.rack] += host.slots
        return max(per_rack)

    def take_changed_hosts(self) -> set[str]:
        """The hosts whose tasks, allotments, containers or liveness changed since the last call (all of them at
        the first): a policy that keeps per-host state looks at these, not at every host, at every decision."""
        taken = set(self._changed_hosts)
        self._changed_hosts.clear()  # in place: every host adds itself to this very set
        return taken

    def dead_racks(self) -> set[int]:
        """Racks with no live host (a planner's guidance for them no longer holds)."""
        return self._dead_racks

    def lose_host(self, name: str) -> None:
        self.hosts[name].alive = False
        self._changed_hosts.add(name)
        self._live_hosts_changed()

    def update_launchable(self, job: Job) -> None:
        """Re-judge whether the job has a task a policy may start (after its pending or finished tasks changed)."""
        pending = self.pending.get(job.job_id)
        if pending is not None and (pending.maps or (pending.reduces and pending.waiting(self.released_stages(job)))):
            if job.job_id not in self.launchable:
                self.launchable[job.job_id] = job
                self.launchable_changes += 1
        elif self.launchable.pop(job.job_id, None) is not None:
            self.launchable_changes += 1

    def allocation(self) -> Allocation:
        """Tasks running, suspended and pending, and the live hosts' cores and memory allocated (fractions).
        Counted without walking the tasks: a run samples it every second, over tens of thousands of tasks."""
        live = [h for h in self.hosts.values() if h.alive]
        on_hosts = sum(len(h.running) for h in live)
        cores, memory = self._capacity.cores, self._capacity.memory_mb
        return Allocation(
            on_hosts - len(self.suspended),
            len(self.suspended),
            sum(len(p) for p in self.pending.values()),
            round(sum(h.used.cores for h in live) / cores, 4) if cores else 0.0,
            round(sum(h.used.memory_mb for h in live) / memory, 4) if memory else 0.0,
        )

    def alive(self) -> frozenset[str]:
        return self._live

    def hosts_by_rack(self) -> Mapping[int, Sequence[str]]:
        """Live hosts per rack (in the order of `hosts`)."""
        return self._live_by_rack

    def dependencies_met(self, job: Job, stage: int) -> bool:
        """A stage's parent stages are done: all of their tasks for a DAG, the slowstart fraction of its maps
        for a MapReduce job's reducers."""
        threshold = 1.0 if job.strict_precedence else self.slowstart
        return all(job.stage_fraction_done(p) >= threshold - 1e-9 for p in job.stages[stage].parents)

    def stage_released(self, job: Job, stage: int) -> bool:
        """A stage's tasks may start: once its dependencies are met, or, under a policy that does not respect
        precedence, once every task of its parent stages has started (its tasks then wait for their parents'
        outputs in their containers; parents still pending could find every container taken by them)."""
        if self.dependencies_met(job, stage):
            return True
        pending = self.pending[job.job_id].stages
        return not self.precedence and not any(p in pending and pending[p].tasks for p in job.stages[stage].parents)

    def released_stages(self, job: Job) -> list[int]:
        """The job's stages with parents that may start, in stage order (worked out again only when the
        job's finished tasks, or without precedence its pending ones, changed: policies ask at every decision)."""
        done = (job.progress, self.precedence or len(self.pending[job.job_id]))
        cached = self._released.get(job.job_id)
        if cached is None or cached[0] != done:
            if len(self._released) > 4 * len(self.jobs) + 64:  # drop finished jobs now and then
                self._released = {j: v for j, v in self._released.items() if j in self.jobs}
            released = [i for i, stage in enumerate(job.stages) if stage.parents and self.stage_released(job, i)]
            cached = self._released[job.job_id] = (done, released)
        return cached[1]

    def runnable_stages(self, job: Job) -> list[int]:
        """The job's stages with a pending task a policy may start: root stages, and released ones."""
        pending = self.pending[job.job_id]
        stages = job.root_stages if pending.maps else []
        if pending.reduces:
            stages = stages + self.released_stages(job)
        return pending.waiting(stages)

    def best_in_stage(self, job: Job, stage: int, host: HostState) -> tuple[Task, bool]:
        """The stage's pending task to start on `host` (for a root stage the best located one) and whether
        it reads its input block from another host (a task with parents fetches from wherever its parents
        ran, wherever it runs: that is not a remote read). The stage must have a pending task."""
        waiting = self.pending[job.job_id].stages[stage]
        if job.stages[stage].parents:
            return waiting.first(), False
        local = waiting.node_local(host.name)
        if local is not None:
            return local, False
        return waiting.rack_local(host.rack) or waiting.first(), True

    def stage_offers(self, job: Job) -> list[StageOffer]:
        """`runnable_stages` with each one's demand as placed (`placed_demand`), worked out again only when the
        job's pending or finished tasks changed: packing policies weigh every job's stages at every decision."""
        pending = self.pending[job.job_id]
        state = (pending.revision, job.progress)
        cached = self._offers.get(job.job_id)
        if cached is None or cached[0] != state:
            if len(self._offers) > 4 * len(self.jobs) + 64:  # drop finished jobs now and then
                self._offers = {j: v for j, v in self._offers.items() if j in self.jobs}
            offers = []
            for i in self.runnable_stages(job):
                first = job.stages[i].tasks[0]  # a stage's tasks share their demand
                finished, tasks, waiting = job.stage_done[i], len(job.stages[i].tasks), len(pending.stages[i].tasks)
                demand = self._alike.setdefault(first.demand, first.demand)
                if job.stages[i].parents:
                    offers.append(StageOffer(i, finished, tasks, waiting, demand, demand, None))
                elif first.kind is StageKind.MAP and first.input_block is not None:
                    local, remote = (placed_demand(first.demand, remote) for remote in (False, True))
                    local, remote = self._alike.setdefault(local, local), self._alike.setdefault(remote, remote)
                    offers.append(StageOffer(i, finished, tasks, waiting, local, remote, pending.stages[i].by_host))
                else:  # a root stage without input blocks: no host holds one (best_in_stage: read elsewhere)
                    offers.append(StageOffer(i, finished, tasks, waiting, demand, demand, pending.stages[i].by_host))
            cached = self._offers[job.job_id] = (state, offers)
        return cached[1]

    def placed_task_demand(self, task: Task, host: str) -> Resources:
        """What the task takes on `host`: a map's demand as placed there (`placed_demand`), another's as it is."""
        if task.kind is not StageKind.MAP or task.input_block is None:
            return task.demand
        return placed_demand(task.demand, host not in task.input_block.replicas)

    def source_has_room(self, task: Task, host: HostState) -> bool:
        """A remote read needs its disk-read and network-out allotment free where the block is (Tetris §3.2)."""
        source = self.read_source(task, host.name)
        if source is None:
            return True
        where = self.hosts[source]
        return remote_read_load(task.demand).fits_in(where.free, where.capacity)

    def released_reduce(self, job: Job) -> Task | None:
        """A pending task of the job's first released stage with parents that has one."""
        return self.pending[job.job_id].first_in(self.released_stages(job))

    def input_sources(self, task: Task, host: str | None = None) -> list[str]:
        """Live hosts holding a map's input block, those in the rack of `host` (default: where the map
        runs) first; the first is the one the map reads from."""
        rack = self.rack_of[host or task.host]
        return sorted(
            (h for h in task.input_block.replicas if self.hosts[h].alive), key=lambda h: (self.rack_of[h] != rack, h)
        )

    def read_source(self, task: Task, host: str) -> str | None:
        """The host a map started on `host` reads its block from; None when `host` holds it."""
        if task.kind is not StageKind.MAP or host in task.input_block.replicas:
            return None
        sources = self.input_sources(task, host)
        return sources[0] if sources else None

    def best_map(self, job: Job, host: HostState) -> tuple[Task | None, Locality]:
        """The job's pending map with the best locality for this host."""
        pending = self.pending[job.job_id]
        for level, task in (
            (Locality.NODE, pending.node_local(host.name)),
            (Locality.RACK, pending.rack_local(host.rack)),
            (Locality.OFF_RACK, pending.any_map()),
        ):
            if task is not None:
                return task, level
        return None, Locality.OFF_RACK
