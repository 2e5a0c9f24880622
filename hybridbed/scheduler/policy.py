"""The policy interface, shared by the emulation and simulation backends, and the policy registry.

A policy answers the scheduler's questions; it never talks to workers, the network or the clock itself:

- `plan(jobs, cluster)`: offline planning over the jobs known in advance (their predicted characteristics).
- `input_racks(job, cluster)`: where the first replica of a job's input blocks goes (None: HDFS's default).
- `job_arrived(job, cluster)`: a job was submitted (its input placed, its tasks pending): per-job
  planning, such as DAGPS's preferred schedule.
- `next_task(host, cluster)`: the next task to start on a host that has a free container, or None.
  Called whenever resources free up or work arrives, again after each launch while the host has room
  (so several tasks can start per heartbeat); the task must be pending, and a reduce released.
- `offer_round(cluster)`: a context around one round of next_task calls, between which nothing changes but the
  tasks they launch, so a policy may keep its order of jobs for the round (the default keeps nothing).
- `release_shuffle(job, cluster)`: whether a job's reducers may fetch map outputs yet (shuffle aggregation).
- `ocs_demand(cluster)`: a rack-by-rack byte matrix to hint to the OCS controller, or None.
- `planned_elephant(job, source_rack, consumer_rack)`: whether the policy aggregated that rack pair's shuffle
  into an elephant by plan, so all of its bytes may ride a circuit (the default: no; the scheduler then
  classifies an aggregate by the bytes announced so far).
- `plan_rows()`: the offline plan, one row per planned job, for the run's plan.csv.
- `preempt(cluster)`: running tasks to suspend (frozen where they are, holding their container and memory),
  suspended ones to resume, tasks to kill (to run again from scratch); asked before every round of launches.
- `launch_share(task, host, cluster)`: the share a task starts with (None: its demand).
- `shares(cluster)`: new shares for running tasks (cores, and the rates of their disk reads, disk writes and
  network fetches), applied while they run.
The last three default to nothing, so policies that never preempt or share need not know of them. A policy
that plans periodically hands the solve to `plan_solver` (scheduler/plan_solver.py) and takes the plan at a
later decision, so that no heartbeat waits for it; the backend sets the solver. A policy with
`respects_precedence = False` may start a DAG stage's tasks once their parent tasks have started, before they
are done (each such start is a dependency-order violation, a disorder, counted per job). One with
`allocates_cores = False` is held to memory and containers only, so it may over-commit a host's cores. Policies register under
the entry point group `hybridbed.policies`; a third-party package adds one without touching hybridbed.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from hybridbed.config.scenario import SchedulerSpec
from hybridbed.config.validation import describe_validation_error
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Job, JobSpec, Resources, Task
from hybridbed.scheduler.plan_solver import ChargedSolver, PlanSolver

ENTRY_POINT_GROUP = "hybridbed.policies"
PREEMPTIONS = ("suspend", "resume", "kill")


@dataclass(frozen=True)
class Preemption:
    """Suspend a running task where it is (it keeps its container and memory), resume a suspended one, or
    kill one (it runs again from scratch, as a new attempt)."""

    task: Task
    action: Literal["suspend", "resume", "kill"]  # one of PREEMPTIONS

    def __post_init__(self) -> None:
        if self.action not in PREEMPTIONS:
            raise ValueError(f"unknown preemption {self.action!r}; one of {', '.join(PREEMPTIONS)}")


@dataclass(frozen=True)
class Share:
    """A running task's new share of its host, applied while it runs: cores (its cgroup's quota) and the rates
    of its disk reads, disk writes and network fetches; its memory stays as it is."""

    task: Task
    allocation: Resources

    @classmethod
    def scaled(cls, task: Task, fraction: float) -> Share:
        """The task's demanded cores and rates times `fraction` (memory and what it is served elsewhere kept)."""
        d = task.demand
        return cls(
            task,
            Resources(
                d.cores * fraction,
                d.memory_mb,
                d.disk_read_mbps * fraction,
                d.disk_write_mbps * fraction,
                d.net_in_mbps * fraction,
                d.net_out_mbps,
            ),
        )


class PolicyParams(BaseModel):
    """A policy's parameters, checked where they are declared (an unknown name is refused). Each policy
    with parameters declares its own subclass as `Params`; every field says where its default comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Policy:
    name: ClassVar[str]
    summary: ClassVar[str]
    default_slowstart: ClassVar[float] = 0.05  # YARN's mapreduce.job.reduce.slowstart.completedmaps
    respects_precedence: ClassVar[bool] = True
    # False: the policy allocates memory slots only and may over-commit a host's cores; its tasks then share
    # the cores as Linux shares them (workers/host_share.py)
    allocates_cores: ClassVar[bool] = True
    Params: ClassVar[type[PolicyParams]] = PolicyParams

    def __init__(self, **params: Any) -> None:
        """Keyword arguments are the policy's parameters (a pydantic ValidationError, a ValueError, names a
        bad one)."""
        self.params = self.Params(**params)
        self.plan_solver: PlanSolver = ChargedSolver()  # the emulated scheduler sets a ProcessSolver

    @property
    def reads_usage(self) -> bool:
        """Whether it decides on the hosts' measured disk and network use (`HostState.tracked_free`), so the
        simulator must work it out at every heartbeat (the emulated workers report it anyway)."""
        return False

    def plan(self, jobs: list[JobSpec], cluster: ClusterState) -> None:
        """Offline planning; the default has nothing to plan."""

    def input_racks(self, job: Job, cluster: ClusterState) -> list[int] | None:
        return None

    def job_arrived(self, job: Job, cluster: ClusterState) -> None:
        """Per-job planning at submission; the default has none."""

    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        raise NotImplementedError

    def offer_round(self, cluster: ClusterState) -> AbstractContextManager[None]:
        return nullcontext()

    def release_shuffle(self, job: Job, cluster: ClusterState) -> bool:
        return True

    def preempt(self, cluster: ClusterState) -> list[Preemption]:
        return []

    def launch_share(self, task: Task, host: HostState, cluster: ClusterState) -> Resources | None:
        return None

    def shares(self, cluster: ClusterState) -> list[Share]:
        return []

    def ocs_demand(self, cluster: ClusterState) -> list[list[float]] | None:
        return None

    def planned_elephant(self, job: Job, source_rack: int, consumer_rack: int) -> bool:
        return False

    def plan_rows(self) -> list[dict]:
        return []


class UnknownPolicy(KeyError):
    pass


def registered_policies() -> dict[str, type[Policy]]:
    return {ep.name: ep.load() for ep in entry_points(group=ENTRY_POINT_GROUP)}


def make_policy(name: str, params: dict | None = None) -> Policy:
    policies = registered_policies()
    if name not in policies:
        raise UnknownPolicy(f"unknown policy {name!r}; registered: {', '.join(sorted(policies)) or 'none'}")
    try:
        return policies[name](**(params or {}))
    except ValidationError as err:
        raise ValueError(f"policy {name}: {describe_validation_error(err)}") from None


def policy_problems(spec: SchedulerSpec) -> list[str]:
    """Why the scheduler section cannot run (an unknown policy, parameters a policy refuses), one line per
    problem naming the field; nothing when it can."""
    problems = []
    for name in sorted({spec.policy, *spec.policy_params}):
        try:
            make_policy(name, spec.params_for(name))
        except (UnknownPolicy, ValueError) as err:
            field = "policy" if name == spec.policy and name not in spec.policy_params else f"policy_params.{name}"
            problems.append(f"scheduler.{field}: {err.args[0]}")
    return problems
