"""The job model: a job is a DAG of stages, a stage a set of like tasks, a task one container's work.

A `JobSpec` is what a workload says about a job (actual sizes, plus the predicted sizes a planner may
see); `build_job` turns it into runnable stages and tasks. MapReduce is the main case: every map writes
one partition per reducer, every reducer fetches its partition from every map. Byte counts are exact
integers, split so that the partitions add up to the job's shuffle size.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


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
        return (self.cores, self.memory_mb, self.disk_read_mbps, self.disk_write_mbps, self.net_in_mbps,
                self.net_out_mbps)

    def fits_in(self, free: "Resources", capacity: "Resources") -> bool:
        """The free resources hold the demand in every dimension the capacity models (cores and memory always)."""
        return all(d <= f + 1e-9 for i, (d, f, c) in enumerate(zip(self.vector(), free.vector(), capacity.vector()))
                   if i < 2 or c > 0)

    def allocatable_in(self, capacity: "Resources") -> bool:
        """Cores and memory fit: what the scheduler core checks, as YARN does, whatever the policy."""
        return self.cores <= capacity.cores + 1e-9 and self.memory_mb <= capacity.memory_mb + 1e-9

    def __add__(self, other: "Resources") -> "Resources":
        return Resources(*(a + b for a, b in zip(self.vector(), other.vector())))

    def __sub__(self, other: "Resources") -> "Resources":
        return Resources(*(a - b for a, b in zip(self.vector(), other.vector())))


@dataclass(frozen=True)
class Predicted:
    """What a planner is told about a recurring job before it runs (may differ from the actual job)."""
    arrival_s: float
    input_bytes: int
    shuffle_bytes: int
    output_bytes: int


@dataclass(frozen=True)
class JobSpec:
    """One job as a workload describes it."""
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

    def __post_init__(self) -> None:
        if self.n_maps < 1:
            raise ValueError(f"job {self.job_id}: n_maps must be at least 1, got {self.n_maps}")
        if self.n_reduces < 0:
            raise ValueError(f"job {self.job_id}: n_reduces must not be negative, got {self.n_reduces}")
        if self.shuffle_bytes and not self.n_reduces:
            raise ValueError(f"job {self.job_id}: {self.shuffle_bytes} shuffle bytes but no reducer")
        for name in ("input_bytes", "shuffle_bytes", "output_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"job {self.job_id}: {name} must not be negative")


class StageKind(str, enum.Enum):
    MAP = "map"
    REDUCE = "reduce"
    GENERIC = "generic"


class TaskState(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
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
    index: int
    demand: Resources
    compute_s: float
    input_block: Block | None = None
    partition_bytes: list[int] = field(default_factory=list)  # map: bytes written per reducer
    fetch_bytes: int = 0  # reduce: bytes fetched from all maps together
    fetched_maps: set[int] = field(default_factory=set)  # reduce: maps whose partition this attempt has
    output_bytes: int = 0
    state: TaskState = TaskState.PENDING
    host: str | None = None
    attempt: int = 0
    started_s: float | None = None
    finished_s: float | None = None


@dataclass
class Stage:
    kind: StageKind
    tasks: list[Task]
    parents: list[int] = field(default_factory=list)  # indices of the stages this one reads from


@dataclass
class Job:
    spec: JobSpec
    stages: list[Stage]
    # kept by the scheduler core, so that policies never count tasks
    n_running: int = 0
    allocated: Resources = Resources(0, 0)  # the demands of its running tasks, summed
    maps_done: int = 0
    reduces_done: int = 0
    started_s: float | None = None
    finished_s: float | None = None

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def maps(self) -> list[Task]:
        return self.stages[0].tasks

    @property
    def reduces(self) -> list[Task]:
        return self.stages[1].tasks if len(self.stages) > 1 else []

    @property
    def tasks(self) -> list[Task]:
        return [t for s in self.stages for t in s.tasks]

    @property
    def done(self) -> bool:
        return self.maps_done == len(self.maps) and self.reduces_done == len(self.reduces)

    def map_fraction_done(self) -> float:
        return self.maps_done / len(self.maps)

    def task_started(self, task: Task) -> None:
        self.n_running += 1
        self.allocated = self.allocated + task.demand

    def task_stopped(self, task: Task) -> None:
        self.n_running -= 1
        self.allocated = self.allocated - task.demand


def split_evenly(total: int, parts: int) -> list[int]:
    """`parts` integers that differ by at most one and add up to `total`."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def build_job(spec: JobSpec, map_demand: Resources, reduce_demand: Resources) -> Job:
    """Stages and tasks of a MapReduce job; every byte of input, shuffle and output is accounted for.
    The demands given are the defaults for a spec that names none of its own."""
    map_demand = spec.map_demand or map_demand
    reduce_demand = spec.reduce_demand or reduce_demand
    block_sizes = split_evenly(spec.input_bytes, spec.n_maps)
    per_map_shuffle = split_evenly(spec.shuffle_bytes, spec.n_maps)
    partitions = [split_evenly(b, spec.n_reduces) if spec.n_reduces else [] for b in per_map_shuffle]
    maps = [
        Task(f"{spec.job_id}-m{i}", spec.job_id, StageKind.MAP, i, map_demand, spec.map_compute_s,
             partition_bytes=partitions[i], output_bytes=0 if spec.n_reduces else split_evenly(spec.output_bytes, spec.n_maps)[i])
        for i in range(spec.n_maps)
    ]
    outputs = split_evenly(spec.output_bytes, spec.n_reduces) if spec.n_reduces else []
    reduces = [
        Task(f"{spec.job_id}-r{r}", spec.job_id, StageKind.REDUCE, r, reduce_demand, spec.reduce_compute_s,
             fetch_bytes=sum(p[r] for p in partitions), output_bytes=outputs[r])
        for r in range(spec.n_reduces)
    ]
    stages = [Stage(StageKind.MAP, maps)]
    if reduces:
        stages.append(Stage(StageKind.REDUCE, reduces, parents=[0]))
    job = Job(spec, stages)
    for task, size in zip(maps, block_sizes):
        task.input_block = Block(f"{spec.job_id}-b{task.index}", size, ())
    return job
