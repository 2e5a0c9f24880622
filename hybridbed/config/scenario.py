"""Scenario files: one YAML document that says everything about a run, validated before anything starts.

Units: the fabric's link rates are the emulated rates (Mb/s). Workload sizes, block sizes and the OCS
elephant threshold are given at full scale and multiplied by `scale`, which should be the ratio of the
emulated to the real link rates (the JobPacker paper's GENI emulation used 1/100 for both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hybridbed.config.constants import (
    HADOOP_BLOCK_BYTES,
    MAP_RATE_BYTES_S,
    MB,
    REDUCE_INPUT_BYTES,
    REDUCE_RATE_BYTES_S,
    TASK_OVERHEAD_S,
)
from hybridbed.config.fabric import FabricSpec, OcsSpec, circuit_scheduler_problems
from hybridbed.config.servers import ServerSpec, place_racks
from hybridbed.config.validation import SpecError, parse_spec

F_EPS = "f-eps"  # the comparison setup: Fair on the EPS-only variant with uplinks at the OCS rate


class _Strict(BaseModel):
    # an infinite or NaN number is no duration, rate or size (YAML's .inf and .nan parse as floats)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ContainerSpec(_Strict):
    cores: float = Field(default=1.0, gt=0, le=64, description="a task's cores unless its workload says otherwise")
    memory_mb: float = Field(default=256.0, ge=64, description="a task's memory limit (its cgroup's)")


class WorkersSpec(_Strict):
    slots_per_host: int = Field(default=2, ge=1, le=64, description="containers a host offers")
    cores_per_host: float = Field(default=2.0, gt=0, description="cores the scheduler may allocate on a host")
    memory_mb_per_host: float = Field(default=2048.0, gt=0, description="memory the scheduler may allocate on a host")
    container: ContainerSpec = ContainerSpec()
    compute: Literal["sleep", "cpu"] = Field(default="sleep", description="how task compute time is emulated")
    task_rate_cap_mbps: float | None = Field(
        default=None, gt=0, description="per-task network cap (emulated Mb/s; a reducer's connections share it)"
    )
    heartbeat_s: float = Field(
        default=0.5, gt=0, le=10, description="between a worker's heartbeats (free containers are offered then)"
    )
    resume_overhead_s: float = Field(
        default=0.0,
        ge=0,
        description="a suspended task's recovery time when resumed (DSP's t_r): it stays stopped this much longer",
    )
    disk_read_mbps_per_host: float = Field(
        default=0.0,
        ge=0,
        description="a host's disk read bandwidth, shared by its tasks' reads and the reads it serves other hosts "
        "(workers/host_share.py, both backends); 0: disk bandwidth not modelled",
    )
    disk_write_mbps_per_host: float = Field(
        default=0.0,
        ge=0,
        description="a host's disk write bandwidth, shared by its tasks' output writes; 0: not modelled",
    )

    @model_validator(mode="after")
    def _slots_fit(self) -> WorkersSpec:
        if self.slots_per_host * self.container.memory_mb > self.memory_mb_per_host:
            raise ValueError(
                f"slots_per_host {self.slots_per_host} x container.memory_mb {self.container.memory_mb:g} "
                f"exceeds memory_mb_per_host {self.memory_mb_per_host:g}"
            )
        if self.container.cores > self.cores_per_host:
            raise ValueError(f"container.cores {self.container.cores:g} exceeds cores_per_host {self.cores_per_host:g}")
        return self


class ShapeSpec(_Strict):
    """How a trace's job sizes become tasks (workloads/derivation.py); the defaults are Hadoop's and the
    JobPacker paper's Fig. 5 (config/constants.py)."""

    block_mb: float = Field(
        default=HADOOP_BLOCK_BYTES / MB, gt=0, description="input per map (one map per block, as Hadoop)"
    )
    reduce_input_mb: float = Field(default=REDUCE_INPUT_BYTES / MB, gt=0, description="shuffle bytes per reducer")
    max_maps: int | None = Field(
        default=None, ge=1, description="a job's maps at most (none: a job larger than the cluster runs in waves)"
    )
    max_reduces: int | None = Field(default=None, ge=1, description="a job's reducers at most (none: no cap)")
    map_rate_mb_s: float = Field(
        default=MAP_RATE_BYTES_S / MB, gt=0, description="a map's compute: input bytes per second"
    )
    reduce_rate_mb_s: float = Field(
        default=REDUCE_RATE_BYTES_S / MB, gt=0, description="a reducer's compute: shuffle and output bytes per second"
    )
    task_overhead_s: float = Field(
        default=TASK_OVERHEAD_S, ge=0, description="compute every task spends besides its bytes"
    )
    compute_scale: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="the share of a task's full-scale bytes its compute is reckoned on: 1, as at full scale;"
        " 0.01, the JobPacker paper's GENI tasks, whose input and output it shrank by 100 (§5.1.3)",
    )


class SuiteSpec(_Strict):
    """The Tetris deployment suite's knobs (source: tetris-suite); see scheduler/tetris_suite.py."""

    maps_large: int = Field(
        default=200, ge=1, description="maps of a large job (the paper's size classes, for the cluster at hand)"
    )
    maps_medium: int = Field(default=100, ge=1, description="maps of a medium job")
    maps_small: int = Field(default=30, ge=1, description="maps of a small job")
    block_mb: float = Field(default=256.0, gt=0, description="input per map")
    cpu_heavy_cores: float = Field(default=4.0, gt=0, description="cores a CPU-heavy task asks for")
    io_share: float = Field(default=0.25, gt=0, le=1, description="of a host's disk and network, per I/O-heavy task")
    cpu_heavy_s: float = Field(default=20.0, gt=0, description="a CPU-heavy task's compute")
    io_heavy_s: float = Field(default=2.0, gt=0, description="an I/O-heavy task's compute (its I/O sets its length)")
    memory_gb: tuple[float, float] = Field(
        default=(2.0, 8.0), description="a task's memory: one of the two (the paper's 2 or 8 GB tasks)"
    )


class DagSpec(_Strict):
    """The DAG workload's knobs (source: dag); see scheduler/dag_workload.py. Task demands and compute
    times follow `workload.suite` (cpu_heavy_cores, io_share, cpu_heavy_s, io_heavy_s, memory_gb, block_mb)."""

    benchmark: Literal["tpch", "tpcds"] = Field(
        default="tpcds", description="whose query shapes (table counts, depths)"
    )
    templates: int = Field(default=20, ge=1, description="distinct query templates drawn from the seed")
    fact_tasks: int = Field(default=20, ge=1, description="scan tasks of a query's fact table at size factor 1")
    reduce_input_mb: float = Field(default=512.0, gt=0, description="what a task of a stage with parents fetches")
    max_tasks: int = Field(default=40, ge=1, description="tasks of a stage at most")
    size_factors: list[float] = Field(
        default=[0.5, 1.0, 2.0], min_length=1, description="a job's size factor: one of these, at random"
    )
    compute_spread: float = Field(
        default=0.8, ge=0, description="sigma of the log-normal factor on a CPU-heavy stage's compute"
    )
    shared_scan: float = Field(
        default=0.3, ge=0, le=1, description="chance that a dimension scan also feeds a later join"
    )
    queues: int = Field(default=1, ge=1, description="job groups the jobs are spread over at random")

    @model_validator(mode="after")
    def _factors_positive(self) -> DagSpec:
        if bad := [f for f in self.size_factors if f <= 0]:
            raise ValueError(f"size_factors must be positive, got {bad}")
        return self


class PredictionSpec(_Strict):
    recurring_fraction: float = Field(
        default=1.0, ge=0, le=1, description="jobs whose sizes and arrival the planners know"
    )
    size_error: float = Field(default=0.0, ge=0, le=1, description="predicted sizes off by up to this fraction")
    arrival_jitter_fraction: float = Field(
        default=0.0, ge=0, le=1, description="recurring jobs that arrive off their prediction"
    )
    arrival_jitter_s: float = Field(default=0.0, ge=0, description="by up to this much")


class WorkloadSpec(_Strict):
    source: Literal["synthetic", "swim", "tetris-suite", "dag"] = Field(
        default="synthetic", description="the generator, or a SWIM trace"
    )
    jobs: int = Field(default=12, ge=1, le=100_000, description="jobs to run (the first ones of a trace)")
    trace: Path | list[Path] | None = Field(
        default=None, description="SWIM trace file, or files read one after the other (source: swim)"
    )
    arrival_window_s: float = Field(default=0.0, ge=0, description="0: a batch; else arrivals uniform in the window")
    max_shuffle_gb: float | None = Field(
        default=None,
        gt=0,
        description="synthetic: cap every job's shuffle at this; swim: leave out trace jobs shuffling more",
    )
    min_shuffle_gb: float = Field(default=0.0, ge=0, description="take only trace jobs shuffling at least this")
    shape: ShapeSpec = ShapeSpec()
    suite: SuiteSpec = SuiteSpec()
    dag: DagSpec = DagSpec()
    predictions: PredictionSpec = PredictionSpec()
    deadline_slack: tuple[float, float] | None = Field(
        default=None,
        description="give every job a deadline: its arrival plus its critical path times a factor "
        "drawn uniformly from [low, high] (None: no deadlines)",
    )

    @model_validator(mode="after")
    def _slack_sane(self) -> WorkloadSpec:
        if self.deadline_slack is not None:
            low, high = self.deadline_slack
            if not 1 <= low <= high:
                raise ValueError(f"deadline_slack must be [low, high] with 1 <= low <= high, got [{low:g}, {high:g}]")
        return self

    @model_validator(mode="after")
    def _trace_given(self) -> WorkloadSpec:
        if self.source == "swim" and not self.trace_files():
            raise ValueError("trace: a SWIM workload needs the trace file")
        for path in self.trace_files():
            if not path.is_file():
                raise ValueError(f"trace: no such file {path}")
        if self.max_shuffle_gb is not None and self.max_shuffle_gb < self.min_shuffle_gb:
            raise ValueError(f"max_shuffle_gb {self.max_shuffle_gb:g} is below min_shuffle_gb {self.min_shuffle_gb:g}")
        return self

    def trace_files(self) -> list[Path]:
        if self.trace is None:
            return []
        return self.trace if isinstance(self.trace, list) else [self.trace]


class SchedulerSpec(_Strict):
    policy: str = Field(default="fair", description="a registered policy (`hybridbed policies`)")
    policy_params: dict[str, dict] = Field(
        default_factory=dict,
        description="parameters per policy name, e.g. {jobpacker: {overprovision: 1.0}}; "
        "a comparison gives each setup its own",
    )
    slowstart: float | None = Field(default=None, ge=0, le=1, description="default: the policy's")
    replicas: int = Field(default=3, ge=1, le=10, description="copies of every input block (HDFS default 3)")
    heartbeat_timeout_s: float = Field(default=3.0, gt=0, description="a worker silent this long is lost")

    def params_for(self, policy: str) -> dict:
        return self.policy_params.get(policy, {})


class Scenario(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="names the results directory")
    backend: Literal["emulation", "simulation"] = Field(
        default="emulation", description="emulation: Mininet, OVS, os-ken, real TCP; simulation: the flow-level model"
    )
    seed: int = Field(
        default=1,
        description="draws the workload, replica placement and the reducers' choice of map hosts: a run is reproducible from it",
    )
    scale: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="emulated / real link rates; workload sizes and the elephant threshold are multiplied by it",
    )
    fabric: FabricSpec
    ocs: OcsSpec = OcsSpec()
    workers: WorkersSpec = WorkersSpec()
    workload: WorkloadSpec = WorkloadSpec()
    scheduler: SchedulerSpec = SchedulerSpec()
    max_duration_s: float = Field(
        default=1800.0, gt=0, description="a run still going after this much workload time fails"
    )
    compare: list[str] | None = Field(
        default=None,
        description="the setups `hybridbed compare` runs when not told "
        f"(registered policies and {F_EPS}); default: the JobPacker paper's four",
    )
    compare_baseline: str = Field(
        default="fair", description="the setup a comparison's makespans and median JCTs are given relative to"
    )
    servers: list[ServerSpec] = Field(
        default_factory=list,
        description="emulation: further servers to spread the racks over, over ssh (docs/multi-server.md); "
        "default: this machine alone. The simulation backend ignores it",
    )
    capture_packets: bool = Field(
        default=False,
        description="emulation: capture every host's TCP headers (tcpdump) into the run's pcap/<host>.pcap and "
        "report the retransmission-timer stalls they show (summary.json's fidelity.tcp_timer_stalls); the "
        "hosts of further servers stream theirs over ssh. The simulation backend ignores it",
    )

    @model_validator(mode="after")
    def _emulable(self) -> Scenario:
        if self.backend != "emulation":
            return self
        if problems := self.fabric.emulation_limits():
            raise ValueError("; ".join(f"fabric.{p}" for p in problems))
        if self.ocs.elephants_wait:
            raise ValueError(
                "ocs.elephants_wait: only the simulation backend models elephants waiting for their circuit"
                " (the emulated ToRs send a dark pair's marked traffic over the EPS)"
            )
        return self

    @model_validator(mode="after")
    def _racks_fit_the_servers(self) -> Scenario:
        if self.servers:
            place_racks(self.fabric.racks, self.servers)  # raises SpecError, a ValueError, naming the field
        return self

    @model_validator(mode="after")
    def _scheduler_fits_the_ocs(self) -> Scenario:
        if problems := circuit_scheduler_problems(self.fabric, self.ocs):
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _heartbeats_can_be_missed(self) -> Scenario:
        timeout, beat = self.scheduler.heartbeat_timeout_s, self.workers.heartbeat_s
        if timeout < 2 * beat:
            raise ValueError(
                f"scheduler.heartbeat_timeout_s {timeout:g} is under two heartbeats (workers.heartbeat_s {beat:g}): "
                "a healthy worker would be declared lost between its heartbeats"
            )
        return self

    @model_validator(mode="after")
    def _suite_fits_a_host(self) -> Scenario:
        if self.workload.source not in ("tetris-suite", "dag"):
            return self
        suite, w = self.workload.suite, self.workers
        if suite.cpu_heavy_cores > w.cores_per_host:
            raise ValueError(
                f"workload.suite.cpu_heavy_cores {suite.cpu_heavy_cores:g} exceeds "
                f"workers.cores_per_host {w.cores_per_host:g}"
            )
        if max(suite.memory_gb) * 1000 > w.memory_mb_per_host:
            raise ValueError(
                f"workload.suite.memory_gb {max(suite.memory_gb):g} GB exceeds "
                f"workers.memory_mb_per_host {w.memory_mb_per_host:g}"
            )
        return self

    def scaled_ocs(self) -> OcsSpec:
        """The controller's settings with the elephant threshold at the emulated scale."""
        return self.ocs.model_copy(update={"elephant_threshold_bytes": self.ocs.elephant_threshold_bytes * self.scale})


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: YAML requires keys to be unique, and
    PyYAML would silently keep the later value."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    first_line: dict[object, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            seen = first_line.get(key)
        except TypeError:  # an unhashable key: construct_mapping reports it
            continue
        if seen is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice (first on line {seen})", key_node.start_mark
            )
        first_line[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=True)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def read_yaml_mapping(path: Path, kind: str) -> dict:
    """A YAML file's top-level mapping (a scenario, a sweep's grid), refusing a key given twice; a file that is
    missing, not YAML or not a mapping is a SpecError naming the path and what the file should be."""
    try:
        data = yaml.load(Path(path).read_text(), Loader=_UniqueKeyLoader)
    except FileNotFoundError:
        raise SpecError(f"{kind} file {path} does not exist") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise SpecError(f"{path} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a {kind} is a mapping of fields, got {type(data).__name__}")
    return data


def read_scenario(path: Path, overrides: dict | None = None) -> dict:
    """A scenario file's fields, with trace paths made relative to the file and `overrides` ("backend" or
    "section.field") applied; a file that is missing, not YAML, not a mapping or with a key given twice is a
    SpecError. Fields of the wrong type are left for `parse_scenario` to report."""
    data = read_yaml_mapping(path, "scenario")
    workload = data.get("workload")
    trace = workload.get("trace") if isinstance(workload, dict) else None
    here = Path(path).resolve().parent
    if isinstance(trace, str):  # relative to the scenario file
        workload["trace"] = str(here / trace)
    elif isinstance(trace, list):
        workload["trace"] = [str(here / t) if isinstance(t, str) else t for t in trace]
    apply_overrides(data, overrides or {})
    return data


def apply_overrides(data: dict, overrides: dict) -> None:
    """Set fields named by path ("seed", "section.field", "section.subsection.field") in a scenario's fields,
    creating missing sections; a malformed section (not a mapping) is left for validation to report."""
    for key, value in overrides.items():
        *sections, field = key.split(".")
        target = data
        for name in sections:
            target = target.setdefault(name, {}) if isinstance(target, dict) else None
        if isinstance(target, dict):
            target[field] = value


def parse_scenario(data: dict) -> Scenario:
    """The scenario's structure validated: every problem is a SpecError naming the field. What the policy
    registry knows (policy names, their parameters, comparison setups) is checked by
    `hybridbed.experiments.scenarios`, which the CLI loads scenarios through."""
    return parse_spec(Scenario, data)
