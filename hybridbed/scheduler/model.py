"""The job model: a job is a DAG of stages, a stage a set of like tasks, a task one container's work.

A `JobSpec` is what a workload says about a job (actual sizes, plus the predicted sizes a planner may
see); `build_job` turns it into runnable stages and tasks. Every task of a stage with parents fetches one
partition from every task of its parent stages (all-to-all, as a MapReduce shuffle or a Tez
scatter-gather edge); MapReduce is the two-stage case (maps, then reducers). Byte counts are exact
integers, split so that the partitions add up to the job's intermediate size.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Resources:
    """A multi-resource demand or capacity: cores and memory (what YARN allocates and the workers'
    cgroups enforce), and disk and network bandwidth in each direction (what a packing policy such as
    Tetris also allocates; 0 in a capacity means the dimension is not modelled)."""

    cores: float = 1.0
    memory_mb: float = 256.0
    disk_read_mbps: float = 0.0
    disk_write_mbps: float = 0.0
    net_in_mbps: float = 0.0
    net_out_mbps: float = 0.0

    def vector(self) -> tuple[float, ...]:
        return (
            self.cores,
            self.memory_mb,
            self.disk_read_mbps,
            self.disk_write_mbps,
            self.net_in_mbps,
            self.net_out_mbps,
        )

    def fits_in(self, free: Resources, capacity: Resources) -> bool:
        """The free resources hold the demand in every dimension the capacity models (cores and memory always).
        Written out field by field: packing policies ask it for every candidate at every decision."""
        return (
            self.cores <= free.cores + 1e-9
            and self.memory_mb <= free.memory_mb + 1e-9
            and (capacity.disk_read_mbps <= 0 or self.disk_read_mbps <= free.disk_read_mbps + 1e-9)
            and (capacity.disk_write_mbps <= 0 or self.disk_write_mbps <= free.disk_write_mbps + 1e-9)
            and (capacity.net_in_mbps <= 0 or self.net_in_mbps <= free.net_in_mbps + 1e-9)
            and (capacity.net_out_mbps <= 0 or self.net_out_mbps <= free.net_out_mbps + 1e-9)
        )

    def allocatable_in(self, capacity: Resources, cores: bool = True) -> bool:
        """Cores and memory fit: what the scheduler core checks, as YARN does, whatever the policy (memory
        alone for a policy that does not allocate cores, as YARN's memory-only resource calculator)."""
        return (not cores or self.cores <= capacity.cores + 1e-9) and self.memory_mb <= capacity.memory_mb + 1e-9

    def __add__(self, other: Resources) -> Resources:
        return Resources(*(a + b for a, b in zip(self.vector(), other.vector())))

    def __sub__(self, other: Resources) -> Resources:
        return Resources(*(a - b for a, b in zip(self.vector(), other.vector())))


@dataclass(frozen=True)
class Predicted:
    """What a planner is told about a recurring job before it runs (may differ from the actual job)."""

    arrival_s: float
    input_bytes: int
    shuffle_bytes: int
    output_bytes: int


@dataclass(frozen=True)
class StageSpec:
    """One stage of a DAG job: `tasks` like tasks that start once their parent stages are done. A root
    stage (no parents) reads `input_bytes` from the distributed file system; a stage with children sends
    `output_bytes` on to them (split evenly among the child stages, each task fetching its share from
    every task of its parents), a stage without children writes them as the job's output."""

    name: str
    tasks: int
    compute_s: float
    parents: tuple[int, ...] = ()
    input_bytes: int = 0
    output_bytes: int = 0
    demand: Resources | None = None  # None: the scenario's container


@dataclass(frozen=True)
class JobSpec:
    """One job as a workload describes it: a MapReduce job (`n_maps` maps feeding `n_reduces` reducers), or
    a DAG of `stages` (see `dag_spec`; the MapReduce fields then summarise it for planners and results)."""

    job_id: str
    arrival_s: float
    input_bytes: int
    shuffle_bytes: int
    output_bytes: int
    n_maps: int
    n_reduces: int
    map_compute_s: float
    reduce_compute_s: float
    recurring: bool = False
    predicted: Predicted | None = None
    map_demand: Resources | None = None  # per-task demands; None: the scenario's container
    reduce_demand: Resources | None = None
    stages: tuple[StageSpec, ...] = ()
    queue: str = "default"  # the job group a fairness policy shares the cluster among
    deadline_s: float | None = None  # when the job should be done (absolute run time; None: no deadline)

    def __post_init__(self) -> None:
        for i, stage in enumerate(self.stages):
            where = f"job {self.job_id} stage {i} ({stage.name})"
            if stage.tasks < 1:
                raise ValueError(f"{where}: tasks must be at least 1, got {stage.tasks}")
            if any(not 0 <= p < i for p in stage.parents) or len(set(stage.parents)) != len(stage.parents):
                raise ValueError(f"{where}: parents must be distinct earlier stages, got {stage.parents}")
            if stage.parents and stage.input_bytes:
                raise ValueError(f"{where}: only a root stage reads input, got input_bytes={stage.input_bytes}")
            if stage.input_bytes < 0 or stage.output_bytes < 0 or stage.compute_s < 0:
                raise ValueError(f"{where}: input_bytes, output_bytes and compute_s must not be negative")
        if self.deadline_s is not None and self.deadline_s <= self.arrival_s:
            raise ValueError(
                f"job {self.job_id}: deadline_s {self.deadline_s:g} is not after arrival_s {self.arrival_s:g}"
            )
        if self.n_maps < 1:
            raise ValueError(f"job {self.job_id}: n_maps must be at least 1, got {self.n_maps}")
        if self.n_reduces < 0:
            raise ValueError(f"job {self.job_id}: n_reduces must not be negative, got {self.n_reduces}")
        if self.shuffle_bytes and not self.n_reduces:
            raise ValueError(f"job {self.job_id}: {self.shuffle_bytes} shuffle bytes but no reducer")
        for name in ("input_bytes", "shuffle_bytes", "output_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"job {self.job_id}: {name} must not be negative")

    def stage_specs(self) -> tuple[StageSpec, ...]:
        """The job's stages; a MapReduce job's are its maps and its reducers."""
        if self.stages:
            return self.stages
        maps = StageSpec(
            "m",
            self.n_maps,
            self.map_compute_s,
            (),
            self.input_bytes,
            self.shuffle_bytes if self.n_reduces else self.output_bytes,
            self.map_demand,
        )
        if not self.n_reduces:
            return (maps,)
        reduces = StageSpec("r", self.n_reduces, self.reduce_compute_s, (0,), 0, self.output_bytes, self.reduce_demand)
        return maps, reduces


def dag_spec(
    job_id: str, arrival_s: float, stages: tuple[StageSpec, ...], recurring: bool = False, queue: str = "default"
) -> JobSpec:
    """A DAG job; its MapReduce fields summarise it (root stages as maps, the others as reducers)."""
    if not stages:
        raise ValueError(f"job {job_id}: a DAG needs at least one stage")
    children = {p for s in stages for p in s.parents}
    roots = [s for s in stages if not s.parents]
    inner = [s for s in stages if s.parents]
    return JobSpec(
        job_id,
        arrival_s,
        input_bytes=sum(s.input_bytes for s in roots),
        shuffle_bytes=sum(s.output_bytes for i, s in enumerate(stages) if i in children),
        output_bytes=sum(s.output_bytes for i, s in enumerate(stages) if i not in children),
        n_maps=sum(s.tasks for s in roots),
        n_reduces=sum(s.tasks for s in inner),
        map_compute_s=max(s.compute_s for s in roots),
        reduce_compute_s=max((s.compute_s for s in inner), default=0.0),
        recurring=recurring,
        stages=tuple(stages),
        queue=queue,
    )


class StageKind(str, enum.Enum):
    MAP = "map"  # a root stage's task: reads an input block
    REDUCE = "reduce"  # a task of a stage with parents: fetches its share of every parent task's output


class TaskState(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUSPENDED = "suspended"  # frozen where it is, holding its container and memory only
    DONE = "done"


@dataclass(frozen=True)
class Block:
    """One input block and the hosts holding its replicas."""

    block_id: str
    size_bytes: int
    replicas: tuple[str, ...]


@dataclass
class Task:
    task_id: str
    job_id: str
    kind: StageKind
    index: int  # within its stage
    demand: Resources
    compute_s: float
    stage: int = 0
    input_block: Block | None = None
    partition_bytes: dict[int, EvenSplit] = field(default_factory=dict)  # child stage -> bytes for each of its tasks
    fetch_bytes: int = 0  # stage with parents: bytes fetched from all parent tasks together
    # parent tasks whose partition this attempt has, in the order fetched (what is new since a count is a slice)
    fetched: dict[str, None] = field(default_factory=dict)
    output_bytes: int = 0  # written as the job's output (a stage without children)
    state: TaskState = TaskState.PENDING
    # what the task holds while on a host: its demand at start, its memory alone while suspended, another
    # CPU share after a live change
    allocation: Resources | None = None
    launch_cores: float = 0.0  # the cores this attempt started with (later share changes: preemptions.csv)
    host: str | None = None
    attempt: int = 0
    started_s: float | None = None
    finished_s: float | None = None
    queued_s: float = 0.0  # when this attempt joined the pending tasks
    suspended_s: float | None = None  # when it was last suspended, while it is
    paused_s: float = 0.0  # this attempt's time suspended, over the suspensions that have ended
    waited_s: float = 0.0  # time it could have run and did not (pending once runnable, suspended), all attempts

    def partition_for(self, consumer: Task) -> int:
        """Bytes of this task's output that `consumer` (a task of a child stage) fetches."""
        return self.partition_bytes[consumer.stage].part(consumer.index)

    @property
    def written_bytes(self) -> int:
        """Everything the task writes to its disk: partitions for the child stages and job output."""
        return sum(split.total for split in self.partition_bytes.values()) + self.output_bytes


def partition_name(consumer: Task) -> str:
    """The file a parent task writes `consumer`'s partition to."""
    return f"part-{consumer.stage}-{consumer.index}"


@dataclass
class Stage:
    name: str
    kind: StageKind
    tasks: list[Task]
    parents: list[int] = field(default_factory=list)  # indices of the stages this one reads from
    children: list[int] = field(default_factory=list)  # indices of the stages reading from this one


@dataclass
class Job:
    spec: JobSpec
    stages: list[Stage]
    # kept by the scheduler core, so that policies never count tasks
    n_running: int = 0
    launches: int = 0  # task attempts started, ever (a task that moved to another host was started again)
    allocated: Resources = Resources(0, 0)  # the demands of its running tasks, summed
    stage_done: list[int] = field(default_factory=list)  # finished tasks per stage (`task_done`, `task_undone`)
    progress: int = 0  # counts every change to stage_done: what is cached of it is stale when this moved
    started_s: float | None = None
    finished_s: float | None = None
    # per stage, when its dependencies were met (roots: at arrival; None: not yet)
    stage_ready_s: list[float | None] = field(default_factory=list)
    disorders: int = 0  # tasks started before their parent stages were done (a DAG's dependency broken)
    maps: list[Task] = field(init=False)  # the root stages' tasks
    reduces: list[Task] = field(init=False)  # the other stages' tasks
    root_stages: list[int] = field(init=False)
    job_id: str = field(init=False)  # the spec's, kept here: policies ask for it for every job at every decision

    def __post_init__(self) -> None:
        self.job_id = self.spec.job_id
        self.stage_done = [0] * len(self.stages)
        self.stage_ready_s = [None] * len(self.stages)
        self.root_stages = [i for i, s in enumerate(self.stages) if not s.parents]
        self.maps = [t for s in self.stages if not s.parents for t in s.tasks]
        self.reduces = [t for s in self.stages if s.parents for t in s.tasks]

    @property
    def strict_precedence(self) -> bool:
        """A DAG's stage starts when its parents are done; a MapReduce job's reducers at slowstart."""
        return bool(self.spec.stages)

    @property
    def tasks(self) -> list[Task]:
        return [t for s in self.stages for t in s.tasks]

    @property
    def done(self) -> bool:
        return all(done == len(stage.tasks) for stage, done in zip(self.stages, self.stage_done))

    def sources_of(self, task: Task) -> list[Task]:
        """The tasks whose output `task` fetches: every task of its parent stages."""
        return [s for p in self.stages[task.stage].parents for s in self.stages[p].tasks]

    def stage_fraction_done(self, stage: int) -> float:
        return self.stage_done[stage] / len(self.stages[stage].tasks)

    @property
    def waited_s(self) -> float:
        """The job's waiting time: the mean over its tasks of the time each could have run and did not."""
        tasks = self.tasks
        return sum(t.waited_s for t in tasks) / len(tasks)

    def task_started(self, task: Task) -> None:
        self.n_running += 1
        self.launches += 1
        self.allocated = self.allocated + task.allocation

    def task_stopped(self, task: Task) -> None:
        self.n_running -= 1
        self.allocated = self.allocated - task.allocation

    def task_done(self, stage: int) -> None:
        self.stage_done[stage] += 1
        self.progress += 1

    def task_undone(self, stage: int) -> None:
        """A finished task's output was lost: it must run again."""
        self.stage_done[stage] -= 1
        self.progress += 1

    def task_reallocated(self, before: Resources, after: Resources) -> None:
        self.allocated = self.allocated - before + after


def split_evenly(total: int, parts: int) -> list[int]:
    """`parts` integers that differ by at most one and add up to `total`."""
    return EvenSplit(total, parts).sizes()


@dataclass(frozen=True, slots=True)
class EvenSplit:
    """`total` split into `parts` that differ by at most one, each part worked out when asked: a task's
    partitions for the tasks of a child stage. A job with tens of thousands of maps and hundreds of
    reducers would otherwise hold millions of them (the paper-scale batch with Hadoop's task shape, 31 M)."""

    total: int
    parts: int
    base: int = field(init=False)
    extra: int = field(init=False)  # the first `extra` parts are `base` + 1

    def __post_init__(self) -> None:
        base, extra = divmod(self.total, self.parts)
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "extra", extra)

    def part(self, index: int) -> int:
        return self.base + (index < self.extra)

    def sizes(self) -> list[int]:
        return [self.base + 1] * self.extra + [self.base] * (self.parts - self.extra)


def build_job(spec: JobSpec, default_demand: Resources) -> Job:
    """Stages and tasks of a job; every byte of input, intermediate data and output is accounted for.
    `default_demand` is the demand of a task whose stage names none of its own."""
    specs = spec.stage_specs()
    children: list[list[int]] = [[] for _ in specs]
    for i, stage in enumerate(specs):
        for p in stage.parents:
            children[p].append(i)
    stages = []
    for i, stage in enumerate(specs):
        shares = split_evenly(stage.output_bytes, len(children[i])) if children[i] else []
        # per child stage, each task's partitions for it (the tasks' totals take at most two values: one
        # EvenSplit each, shared)
        per_task = {}
        for c, share in zip(children[i], shares):
            totals = split_evenly(share, stage.tasks)
            splits = {total: EvenSplit(total, specs[c].tasks) for total in set(totals)}
            per_task[c] = [splits[total] for total in totals]
        final = [0] * stage.tasks if children[i] else split_evenly(stage.output_bytes, stage.tasks)
        kind = StageKind.REDUCE if stage.parents else StageKind.MAP
        tasks = [
            Task(
                f"{spec.job_id}-{stage.name}{k}",
                spec.job_id,
                kind,
                k,
                stage.demand or default_demand,
                stage.compute_s,
                stage=i,
                output_bytes=final[k],
                partition_bytes={c: per_task[c][k] for c in children[i]},
            )
            for k in range(stage.tasks)
        ]
        stages.append(Stage(stage.name, kind, tasks, list(stage.parents), children[i]))
    job = Job(spec, stages)
    for index, consumers in enumerate(job.stages):  # a task fetches its part of every source's split for its
        if consumers.parents:  # stage; the sources share a few distinct splits, counted once per stage
            shared = Counter(source.partition_bytes[index] for source in job.sources_of(consumers.tasks[0]))
            for task in consumers.tasks:
                task.fetch_bytes = sum(count * split.part(task.index) for split, count in shared.items())
    block_sizes = [
        size for stage in specs if not stage.parents for size in split_evenly(stage.input_bytes, stage.tasks)
    ]
    for n, (task, size) in enumerate(zip(job.maps, block_sizes)):
        task.input_block = Block(f"{spec.job_id}-b{n}", size, ())
    return job


class Locality(enum.IntEnum):
    NODE = 0
    RACK = 1
    OFF_RACK = 2


def locality_of(replicas: tuple[str, ...], host: str, rack_of: dict[str, int]) -> Locality:
    """Where a task reads from, seen from `host`: tasks without input blocks (reduces) count as node-local."""
    if not replicas or host in replicas:
        return Locality.NODE
    if any(rack_of[r] == rack_of[host] for r in replicas):
        return Locality.RACK
    return Locality.OFF_RACK


@dataclass(frozen=True)
class TaskAction:
    """A preemption or CPU share change the backend carries out on the task's host (the attempt and host
    as they were when decided: a killed task is already requeued as a new attempt)."""

    task: Task
    attempt: int
    host: str
    action: Literal["suspend", "resume", "kill", "share"]
    allocation: Resources | None = None  # share: the task's new cores and rates


@dataclass(frozen=True)
class Allocation:
    """What the scheduler has handed out at one moment: tasks running, suspended and pending, and the
    fractions of the live hosts' cores and memory allocated (allocation.csv)."""

    running_tasks: int
    suspended_tasks: int
    pending_tasks: int
    cores_allocated: float
    memory_allocated: float
