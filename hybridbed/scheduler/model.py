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
    """A multi-resource demand or capacity: cores, memory, disk and network bandwidth."""
    cores: float = 1.0
    memory_mb: float = 256.0
    disk_mbps: float = 0.0
    net_mbps: float = 0.0

    def fits_in(self, capacity: "Resources") -> bool:
        """Cores and memory always count; disk and network only where the capacity gives a bandwidth."""
        pairs = [(self.cores, capacity.cores), (self.memory_mb, capacity.memory_mb)]
        pairs += [(d, c) for d, c in ((self.disk_mbps, capacity.disk_mbps), (self.net_mbps, capacity.net_mbps)) if c > 0]
        return all(demand <= cap + 1e-9 for demand, cap in pairs)

    def __add__(self, other: "Resources") -> "Resources":
        return Resources(self.cores + other.cores, self.memory_mb + other.memory_mb,
                         self.disk_mbps + other.disk_mbps, self.net_mbps + other.net_mbps)

    def __sub__(self, other: "Resources") -> "Resources":
        return Resources(self.cores - other.cores, self.memory_mb - other.memory_mb,
                         self.disk_mbps - other.disk_mbps, self.net_mbps - other.net_mbps)


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
    n_running: int = 0  # kept by the scheduler core, so that policies never count tasks
    maps_done: int = 0
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
        return all(t.state is TaskState.DONE for t in self.tasks)

    def map_fraction_done(self) -> float:
        return self.maps_done / len(self.maps)


def split_evenly(total: int, parts: int) -> list[int]:
    """`parts` integers that differ by at most one and add up to `total`."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def build_job(spec: JobSpec, map_demand: Resources, reduce_demand: Resources) -> Job:
    """Stages and tasks of a MapReduce job; every byte of input, shuffle and output is accounted for."""
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
