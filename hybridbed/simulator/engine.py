"""The flow-level simulator: the emulation's scheduler core and policy objects, driven by simulated time.

What the emulation's workers do, modelled: a map streams, reading its input block (from the nearest
replica as a flow, or from its own host: over its disk where disks are modelled, else at no cost) while
it computes for its modelled time and writes its output (over its disk, where modelled); it is done when
all are. A task with parents (a reduce) fetches the partition of every parent task over connections as
the emulation's workers open them (Hadoop's shuffle, `workers.shuffle`: one flow per host copying up to
20 outputs, PARALLEL_FETCHES at a time), then computes while writing its output. Flows share links
max-min fairly (`fairshare`), held to the caps `scheduler.transfers` gives their task (its allocated
rates, the scenario's per-task cap; a reducer's flows share theirs over a link of the task's own), as
the emulation's workers pace theirs. The OCS follows
the controller's periodic mode (`fabric.SimulatedOcs`), matching on the policy's hints and the
measured rack-to-rack bytes; with `ocs.elephants_wait` an elephant connection whose rack pair has no lit
circuit sends nothing until one lights (a reducer's fetchers pass over the hosts behind it meanwhile, and a
connection stopped longer than Hadoop's read timeout breaks, giving its fetcher back), and what waits counts
as the pair's demand (at no less than the elephant threshold). Every worker heartbeat
(all workers beat together) and every job arrival offers every free container to the policy; a task's end
offers its host's containers at once.

Everything happens in a fixed order from the scenario's seed, so a run is reproducible to the byte (unless the
policy itself looks at the wall clock: DSP's MILP stops at a time limit); flows end on the clock's microsecond
ticks and measured demand is read in whole bytes, so the same run with another exact rate computation (the
reference) is too.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from hybridbed.config.addressing import FabricPlan
from hybridbed.config.constants import SHUFFLE_READ_TIMEOUT_S
from hybridbed.config.scenario import Scenario
from hybridbed.controller.circuits import Configuration, MeasuredDemand, combined_demand
from hybridbed.controller.demand_log import demand_rows
from hybridbed.results.path_accounting import path_by_ocs_share
from hybridbed.results.progress import Progress
from hybridbed.results.records import (
    AllocationTimeline,
    CsvLog,
    LinkCounter,
    LinkCounterLog,
    action_row,
    job_row,
    task_row,
)
from hybridbed.scheduler.assembly import container, scheduler_core
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.model import JobSpec, Resources, StageKind, Task, TaskAction, build_job
from hybridbed.scheduler.transfers import transfer_cap_mbps
from hybridbed.simulator.fabric import MBPS_TO_BYTES_S, FabricLinks, SimulatedOcs
from hybridbed.simulator.fairshare import RateSolver
from hybridbed.simulator.flows import FINISH_TOLERANCE_S, Flow, FlowTable
from hybridbed.workers.host_share import HostShare
from hybridbed.workers.shuffle import GroupTally, ShuffleFetches, fetch_order

LOOPBACK_BYTES_S = 10e9  # a reducer reading its own host's map output: a local copy, not a link
# Flows end on the clock's ticks (flows.csv's resolution): the next end is put off to the next tick. Two
# max-min computations exact to rounding (the relaxed one and the reference) then end the same flows at the
# same instants; off the ticks, their last-bit differences reorder ends that fall together, and which task
# ends first, or which flows end together within FINISH_FRACTION, fans out into different runs.
CLOCK_TICKS_PER_S = 1_000_000
PROGRESS_INTERVAL_S = 0.5  # wall-clock seconds between progress reports


def next_tick(t: float) -> float:
    """The clock's first tick at or after t (a t within a thousandth of a tick past one is on it: its float
    product with the ticks per second can land just above the tick)."""
    return math.ceil(t * CLOCK_TICKS_PER_S - 1e-3) / CLOCK_TICKS_PER_S if math.isfinite(t) else t


class SimulationTimeout(RuntimeError):
    pass


@dataclass
class ReduceFetches:
    """A running reduce attempt's shuffle: its connections (which parent outputs are where, waiting, in
    flight, fetched), each partition's size, and the link its connections share (None: uncapped)."""

    task: Task
    attempt: int
    n_sources: int
    plan: ShuffleFetches  # on the simulated clock
    sizes: dict[str, int] = field(default_factory=dict)  # parent task -> its partition's bytes
    elephants: set[str] = field(default_factory=set)  # parent tasks announced as part of an elephant
    elephant_racks: set[int] = field(default_factory=set)  # the racks of those parents' hosts
    fetched_bytes: int = 0
    link: int | None = None


@dataclass
class Compute:
    """A running task's compute: the work left (seconds at its full share), the pace it goes at (the share of
    its demanded cores its host gives it; 0 while suspended), since when, and a token that outdates its scheduled end."""

    left_s: float
    pace: float
    since: float
    token: int = 0


@dataclass
class ResultLogs:
    jobs: CsvLog
    tasks: CsvLog
    flows: CsvLog
    ocs_events: CsvLog
    ocs_demand: CsvLog
    actions: CsvLog
    allocation: AllocationTimeline
    links: LinkCounterLog

    def close(self) -> None:
        for log in (
            self.jobs,
            self.tasks,
            self.flows,
            self.ocs_events,
            self.ocs_demand,
            self.actions,
            self.allocation,
            self.links,
        ):
            log.close()


class Simulation:
    def __init__(self, scenario: Scenario, logs: ResultLogs, rates: RateSolver | None = None):
        self.scenario = scenario
        self.logs = logs
        fabric = scenario.fabric
        plan = FabricPlan(fabric)
        host_racks = {h.name: h.rack for h in plan.hosts()}  # the emulation's host names
        self.core: SchedulerCore = scheduler_core(scenario, host_racks)
        self.policy, self.cluster = self.core.policy, self.core.cluster
        workers = scenario.workers
        self.links = FabricLinks(fabric, host_racks, workers.disk_read_mbps_per_host, workers.disk_write_mbps_per_host)
        self.flows = FlowTable(self.links, rates)
        self._usage_links = self.links.host_usage_links()
        self._core_ports = [
            (port, *self.links.core_positions(port.rack, port.ocs_port)) for port in plan.tor_core_ports()
        ]
        self.task_cap_mbps = workers.task_rate_cap_mbps
        ocs = scenario.scaled_ocs()
        self.ocs = SimulatedOcs(fabric, ocs)
        self._ocs_round = 0  # the interval whose slots are due; a later interval's schedule replaces them
        self.steering = scenario.ocs.steering  # in `marked` mode task traffic is unmarked
        self.elephants_wait = scenario.ocs.elephants_wait and fabric.has_ocs  # F-EPS has no circuit to wait for
        self._threshold = ocs.elephant_threshold_bytes
        # per rack pair without a circuit, in elephants_wait mode: its stopped elephant connections, with the
        # bytes each has left and since when it is stopped, and the reducers whose fetchers passed over its hosts,
        # each with its fetches as they were then (ordered, as every collection the run iterates: a set of strings
        # iterates in an order that changes from process to process)
        self._waiting: dict[tuple[int, int], dict[Flow, tuple[float, float]]] = {}
        self._passed_over: dict[tuple[int, int], dict[str, ReduceFetches]] = {}
        # when stopped connections read nothing for too long: (deadline, order, pair, connection, stopped since); a
        # connection that went on or stopped again is dropped when its deadline comes up (`_next_read_timeout`)
        self._read_deadlines: list[tuple[float, int, tuple[int, int], Flow, float]] = []
        self._waits_since: dict[tuple[int, int], float] = {}  # per rack pair whose elephants wait: since when
        self.elephant_waits: list[float] = []  # each rack pair's wait for its circuit, in seconds, as it ended
        self.read_timeouts = 0  # stopped connections that broke at the read timeout
        self._measured = MeasuredDemand(fabric.racks, scenario.ocs.measured_demand)
        self.now = 0.0
        self.events = 0
        self._timed: list[tuple[float, int, str, object]] = []
        self._order = itertools.count()
        self._reduces: dict[str, ReduceFetches] = {}
        self._parts: dict[str, int] = {}  # per running task: its transfers and compute still under way
        self._compute: dict[str, Compute] = {}
        self._cpu = {name: HostShare(host.capacity.cores) for name, host in self.cluster.hosts.items()}
        self._paused: dict[str, list[tuple[Flow, float]]] = {}  # suspended task -> its flows, bytes left
        self._suspensions: dict[str, int] = {}  # a resumption takes effect only if no suspension came after
        self._stats: dict[str, dict] = {}
        self._offer_all = False  # offer every host's free containers to the policy
        self._offer: dict[str, None] = {}  # hosts whose containers to offer

    # the event loop -------------------------------------------------------------------------------
    def run(self, specs: list[JobSpec], on_progress: Callable[[Progress], None] | None = None) -> None:
        """Simulate the workload to its end. Raises SimulationTimeout past the scenario's max_duration_s."""
        for spec in sorted(specs, key=lambda s: (s.arrival_s, s.job_id)):
            self._at(spec.arrival_s, "arrive", spec)
        self._at(0.0, "heartbeat", None)
        ocs = self.scenario.ocs
        if self.scenario.fabric.has_ocs and ocs.mode == "periodic":
            self._at(ocs.reconfig_interval_s, "ocs_tick", ocs.reconfig_interval_s)
        reported = time.monotonic()
        while len(self.core.finished) < len(specs):
            t = min(self._next_flow_end(), self._timed[0][0] if self._timed else np.inf, self._next_read_timeout())
            if t > self.scenario.max_duration_s:
                raise SimulationTimeout(
                    f"workload not done after max_duration_s={self.scenario.max_duration_s:g} "
                    f"simulated seconds ({len(self.core.finished)}/{len(specs)} jobs{self._stuck()})"
                )
            self.flows.advance(t - self.now)
            self.now = t
            if self.logs.links.due(t):
                self.record_links()
            for flow in self.flows.pop_finished(t):
                self._flow_finished(flow)
            while self._timed and self._timed[0][0] <= t:
                _, _, kind, payload = heapq.heappop(self._timed)
                self._handle(kind, payload)
            while self._next_read_timeout() <= t:
                _, _, pair, flow, _ = heapq.heappop(self._read_deadlines)
                self._read_timed_out(pair, flow)
            self._decide()
            if self.logs.allocation.due(self.now):
                self.logs.allocation.record(self.cluster.allocation(), self.now)
            self.flows.settle()
            self.events += 1
            if on_progress is not None and time.monotonic() - reported >= PROGRESS_INTERVAL_S:
                on_progress(self.progress(len(specs)))
                reported = time.monotonic()
        if on_progress is not None:
            on_progress(self.progress(len(specs)))

    def _stuck(self) -> str:
        """What a run past its deadline still waits for that the user may not see: elephants held for circuits
        their rack pairs are not given."""
        waiting = {pair: left for pair, left in self._elephants_waiting().items() if left > 0}
        if not waiting:
            return ""
        return (
            f"; the elephants of {len(waiting)} rack pairs ({sum(waiting.values()):,.0f} bytes) still wait for a"
            f" circuit from ocs.scheduler {self.scenario.ocs.scheduler}"
        )

    def _next_flow_end(self) -> float:
        """When the next flow ends: the clock's first tick at or after its exact end (now if one is due)."""
        left = self.flows.time_to_next_finish()
        return self.now if left == 0 else max(self.now, next_tick(self.now + left))

    def record_links(self) -> None:
        """A links.csv sample: every ToR core port's bytes up and down so far (exact: rates are constant
        between events)."""
        core = self.flows.core_bytes
        self.logs.links.record(
            self.now,
            [
                LinkCounter(p.switch, p.port, p.link, round(core[up]), round(core[down]))
                for p, up, down in self._core_ports
            ],
        )

    def progress(self, total: int) -> Progress:
        running = sum(len(h.running) for h in self.cluster.hosts.values())
        return Progress(len(self.core.finished), total, self.now, running)

    def _at(self, when: float, kind: str, payload: Any) -> None:
        heapq.heappush(self._timed, (when, next(self._order), kind, payload))

    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "arrive":
            self.core.submit(build_job(payload, container(self.scenario)), self.now)
            self._offer_all = True
        elif kind == "computed":
            self._computed(*payload)
        elif kind == "resumed":
            self._resumed(*payload)
        elif kind == "heartbeat":
            self._offer_all = True
            if self.policy.reads_usage:
                self._report_usage()
            self._at(self.now + self.scenario.workers.heartbeat_s, "heartbeat", None)
        elif kind == "ocs_tick":
            self._ocs_tick(payload)
        elif kind == "ocs_slot":
            self._ocs_slot(*payload)
        elif kind == "ocs_lit":
            for a, b in self.ocs.light():
                self._reroute(a, b)
        elif kind == "penalty_over":
            self._penalty_over(*payload)

    def _report_usage(self) -> None:
        """Every host's resource tracker reports the disk and network bandwidth its transfers use now, as the
        workers' heartbeats do in the emulation (`HostState.tracked_free`)."""
        loads = self.flows.link_loads()[self._usage_links] / MBPS_TO_BYTES_S
        window = self.scenario.workers.heartbeat_s
        for name, (read, write, received, sent) in zip(self.links.host_index, loads.tolist()):
            self.cluster.hosts[name].report_usage(Resources(0, 0, read, write, received, sent), self.now, window)

    def _decide(self) -> None:
        """Launch what the policy chooses for the containers on offer, tell consumers about parent outputs."""
        for action in self.core.act(self.now):
            self._carry_out(action)
        if self._offer_all or self._offer:
            hosts = None if self._offer_all else list(self._offer)
            self._offer_all, self._offer = False, {}
            for launch in self.core.schedule(self.now, hosts):
                self._launch(launch.task)
        told: dict[str, ReduceFetches] = {}  # the reducers told of new outputs, in the order first told
        rack_of = self.cluster.rack_of
        for notice in self.core.shuffle_notices():
            fetches = told[notice.consumer.task_id] = self._reduces[notice.consumer.task_id]
            for source, size, elephant in zip(notice.sources, notice.sizes, notice.elephants, strict=True):
                fetches.sizes[source.task_id] = size
                if elephant:
                    fetches.elephants.add(source.task_id)
                    fetches.elephant_racks.add(rack_of[source.host])
                fetches.plan.announce(source.task_id, source.host)
        for fetches in told.values():
            self._pump(fetches)

    # tasks ----------------------------------------------------------------------------------------
    def _launch(self, task: Task) -> None:
        """A map streams: it reads its block, computes and writes its output at once, and is done when all
        three are. A reducer first fetches every partition, then computes and writes its output at once."""
        stats = self._stats[task.task_id] = {"written_bytes": task.written_bytes}
        if task.kind is StageKind.MAP:
            block = task.input_block
            if task.host in block.replicas:
                stats["read_local_bytes"] = block.size_bytes
                source = task.host if self.links.models_disk else None  # else a local read costs nothing
            else:
                stats["read_remote_bytes"] = block.size_bytes
                source = self.cluster.read_source(task, task.host)
            if source is not None:
                self._start_part(Flow("input", task, task.attempt, None, source, task.host, block.size_bytes, self.now))
            self._compute_and_write(task, task.attempt)
        else:
            sources = len(self.cluster.jobs[task.job_id].sources_of(task))
            plan = ShuffleFetches(
                clock=lambda: self.now, rng=fetch_order(self.scenario.seed, task.task_id, task.attempt)
            )
            fetches = self._reduces[task.task_id] = ReduceFetches(task, task.attempt, sources, plan)
            if self.elephants_wait:  # its waiting bytes per map rack: what a dark pair's elephants queue
                fetches.plan.tally = GroupTally(self.cluster.rack_of.__getitem__, fetches.sizes.__getitem__)
            self._hold_shuffle_rate(fetches)

    def _compute_and_write(self, task: Task, attempt: int) -> None:
        """Start the task's compute and (where disks are modelled) the write of its output."""
        written = self._stats[task.task_id]["written_bytes"]
        self._count_part(task)
        self._compute[task.task_id] = Compute(task.compute_s, 0.0, self.now)
        self._share_cpu(task)
        if self.links.models_disk and written:
            self._start_part(Flow("write", task, attempt, None, task.host, task.host, written, self.now))

    def _start_part(self, flow: Flow) -> None:
        self._count_part(flow.task)
        self._start_flow(flow)

    def _count_part(self, task: Task) -> None:
        self._parts[task.task_id] = self._parts.get(task.task_id, 0) + 1

    def _pace(self, task: Task) -> float:
        """How fast the task computes now: not at all while suspended, else at the share of its demanded cores
        its host gives it (its allocated cores, less where the host's cores are over-committed)."""
        given = self._cpu[task.host].given.get(task.task_id)
        if given is None:
            return 0.0
        demanded = task.demand.cores
        return min(1.0, given / demanded) if demanded > 0 else 1.0

    def _share_cpu(self, task: Task, host: str | None = None) -> None:
        """The task started or stopped computing, was suspended or resumed, or got a new share: share its
        host's cores anew (`workers.host_share`, as Linux does) and re-pace it and every task whose cores changed.
        `host`: where it ran, for a killed task (no longer on any)."""
        host = host or task.host
        assert host is not None
        computing = task.task_id in self._compute and task.task_id not in self._paused
        changed = self._cpu[host].set(task.task_id, task.allocation.cores if computing else None)
        running = self.cluster.hosts[host].running
        self._repace(task)
        for task_id in changed:
            if task_id != task.task_id:
                self._repace(running[task_id])

    def _schedule_compute(self, task: Task, attempt: int, compute: Compute) -> None:
        compute.token += 1
        if compute.pace > 0:
            self._at(self.now + compute.left_s / compute.pace, "computed", (task, attempt, compute.token))

    def _computed(self, task: Task, attempt: int, token: int) -> None:
        compute = self._compute.get(task.task_id)
        if compute is not None and compute.token == token and task.attempt == attempt:
            del self._compute[task.task_id]
            self._share_cpu(task)
            self._part_done(task, attempt)

    def _part_done(self, task: Task, attempt: int) -> None:
        if task.attempt != attempt:
            return  # a killed attempt's leftovers
        self._parts[task.task_id] -= 1
        if self._parts[task.task_id] == 0:
            self._task_done(task, attempt)

    def _task_done(self, task: Task, attempt: int) -> None:
        stats = self._stats.pop(task.task_id)
        self._end_fetches(task)
        self._parts.pop(task.task_id, None)
        self.logs.tasks.write(task_row(task, self.now, self.cluster.rack_of, stats))
        unfinished = self.cluster.jobs.get(task.job_id)
        released = len(self.cluster.released_stages(unfinished)) if unfinished is not None else 0
        job = self.core.task_finished(task.task_id, attempt, self.now)
        if job is not None:
            self.logs.jobs.write(job_row(job))
        elif unfinished is not None and len(self.cluster.released_stages(unfinished)) > released:
            self._offer_all = True  # new work for every free host, as the emulated scheduler's next pass offers it
        self._offer[task.host] = None

    # preemption and CPU shares --------------------------------------------------------------------
    def _carry_out(self, action: TaskAction) -> None:
        """What the emulation's workers do to a preempted or re-shared task: a suspended task stops computing
        and transferring where it is; a resumed one goes on from there after the recovery overhead; a killed
        one is gone (the core runs it again); a new share changes its compute pace and its flows' caps."""
        self.logs.actions.write(action_row(action, self.now))
        task = action.task
        if action.action == "suspend":
            self._paused.setdefault(task.task_id, self._take_out(task))
            self._share_cpu(task)
            self._suspensions[task.task_id] = self._suspensions.get(task.task_id, 0) + 1
        elif action.action == "resume":
            self._at(
                self.now + self.scenario.workers.resume_overhead_s,
                "resumed",
                (task, action.attempt, self._suspensions[task.task_id]),
            )
        elif action.action == "kill":
            self._take_out(task)
            self._end_fetches(task)
            for running in (self._compute, self._paused, self._parts, self._stats, self._suspensions):
                running.pop(task.task_id, None)
            self._share_cpu(task, action.host)
            self._offer[action.host] = None
        else:
            self._share_cpu(task)
            if task.task_id in self._reduces:
                self._hold_shuffle_rate(self._reduces[task.task_id])
            for flow, remaining in self._take_out(task):
                self._start_flow(flow, remaining)

    def _repace(self, task: Task) -> None:
        """The task's pace may have changed (suspended, resumed, a new share, its host's cores shared anew):
        account the compute done at the old pace and go on at the new one (its compute ends at another time)."""
        compute = self._compute.get(task.task_id)
        if compute is not None:
            compute.left_s -= (self.now - compute.since) * compute.pace
            compute.since = self.now
            compute.pace = self._pace(task)
            self._schedule_compute(task, task.attempt, compute)

    def _resumed(self, task: Task, attempt: int, suspensions: int) -> None:
        if task.attempt != attempt or self._suspensions.get(task.task_id) != suspensions:
            return  # killed, or suspended again before the recovery was over
        paused = self._paused.get(task.task_id)
        if paused is None:
            return
        del self._paused[task.task_id]
        self._share_cpu(task)
        for flow, remaining in paused:
            self._start_flow(flow, remaining)
        if task.task_id in self._reduces:
            self._pump(self._reduces[task.task_id])

    def _pump(self, fetches: ReduceFetches) -> None:
        """Open the connections the reducer's shuffle allows now (none while it is suspended)."""
        if fetches.task.task_id in self._paused:
            return
        task = fetches.task
        dark = self._dark_elephant_racks(fetches)
        if dark:
            opened, passed_over = fetches.plan.open_passing_over(dark)
            rack = self.cluster.rack_of[str(task.host)]
            for src in passed_over:  # noted, so that the reducer opens connections when the pair lights
                pair = (cast(int, src), rack)
                reducers = self._passed_over.setdefault(pair, {})
                if reducers.get(task.task_id) is not fetches:  # (noted already: the pair waits since then)
                    reducers[task.task_id] = fetches
                    self._began_waiting(pair)
        else:
            opened = fetches.plan.open()
        for connection in opened:
            size = sum(map(fetches.sizes.__getitem__, connection.sources))
            flow = Flow("shuffle", task, fetches.attempt, connection, connection.host, task.host, size, self.now)
            flow.elephant = not fetches.elephants.isdisjoint(connection.sources)
            self._start_flow(flow)

    def _dark_elephant_racks(self, fetches: ReduceFetches) -> set[int]:
        """The racks the reducer's fetchers pass over now, as Hadoop's fetchers pass over a host they cannot
        copy from for now: in elephants_wait mode, those that hold its elephant outputs and have no lit
        circuit to its rack (none when it has no elephant outputs: a third of the calls in a paper-scale Fair
        run)."""
        if not self.elephants_wait or not fetches.elephant_racks:
            return set()
        rack, lit = self.cluster.rack_of[str(fetches.task.host)], self.ocs.lit
        return {src for src in fetches.elephant_racks if src != rack and (src, rack) not in lit}

    def _hold_shuffle_rate(self, fetches: ReduceFetches) -> None:
        """Give the reducer's connections the link they share at its rate now (or none, uncapped)."""
        cap_mbps = transfer_cap_mbps(fetches.task.allocation, "shuffle", False, self.task_cap_mbps)
        if cap_mbps is None:
            if fetches.link is not None:
                self.flows.close_task_link(fetches.link)
            fetches.link = None
        elif fetches.link is None:
            fetches.link = self.flows.open_task_link(cap_mbps * MBPS_TO_BYTES_S)
        else:
            self.flows.set_task_link(fetches.link, cap_mbps * MBPS_TO_BYTES_S)

    def _end_fetches(self, task: Task) -> None:
        fetches = self._reduces.pop(task.task_id, None)
        if fetches is not None and fetches.link is not None:
            self.flows.close_task_link(fetches.link)

    # flows ----------------------------------------------------------------------------------------
    def _start_flow(self, flow: Flow, remaining: float | None = None) -> None:
        local = flow.src == flow.dst
        a, b = self.cluster.rack_of[flow.src], self.cluster.rack_of[flow.dst]
        circuit = self.ocs.lit.get((a, b))
        steerable = self.steering == "all" or (self.steering == "elephant" and flow.elephant)
        if self.elephants_wait and steerable and a != b and circuit is None:
            self._stop((a, b), flow, flow.size if remaining is None else remaining)
            return
        if flow.kind == "shuffle":  # held to the task's rate by its link; a local copy by the loopback
            link = self._reduces[flow.task.task_id].link
            self.flows.add(flow, LOOPBACK_BYTES_S if local else np.inf, circuit, remaining, link, steerable)
            return
        cap_mbps = transfer_cap_mbps(flow.task.allocation, flow.kind, local, self.task_cap_mbps)
        cap = cap_mbps * MBPS_TO_BYTES_S if cap_mbps else np.inf
        self.flows.add(flow, cap, circuit, remaining, steerable=steerable)

    def _take_out(self, task: Task) -> list[tuple[Flow, float]]:
        """Remove the task's flows, those waiting for a circuit too: each with the bytes it has still to send."""
        flows = self.flows.take_out(task)
        for waiting in self._waiting.values():
            for flow in [flow for flow in waiting if flow.task is task]:
                flows.append((flow, waiting.pop(flow)[0]))
        return flows

    def _flow_finished(self, flow: Flow) -> None:
        task = flow.task
        if flow.kind == "write":
            self._part_done(task, flow.attempt)
            return
        if flow.kind == "input":
            if flow.src != flow.dst:  # what the emulation's workers log: connections
                self._log_flow(flow, flow.size, flow.ocs_bytes)
            self._part_done(task, flow.attempt)
            return
        fetches = self._reduces[task.task_id]
        assert flow.connection is not None
        fetches.plan.done(flow.connection)
        self._outputs_fetched(fetches, flow, len(flow.connection.sources), flow.size, flow.ocs_bytes)
        self._pump(fetches)
        if len(fetches.plan.fetched) == fetches.n_sources:
            self._stats[task.task_id]["fetched_bytes"] = fetches.fetched_bytes
            self._compute_and_write(task, fetches.attempt)

    def _log_flow(self, flow: Flow, size: int, ocs_bytes: float) -> None:
        """flows.csv's row for the flow, ended now, having moved `size` bytes of which `ocs_bytes` by circuit (the
        values in FLOW_PATH_FIELDS' order)."""
        src_rack, dst_rack = self.cluster.rack_of[flow.src], self.cluster.rack_of[flow.dst]
        path = "rack" if src_rack == dst_rack else path_by_ocs_share(ocs_bytes / size if size else 0.0)
        task = flow.task
        self.logs.flows.write_values(
            (
                task.job_id,
                task.task_id,
                flow.attempt,
                flow.kind,
                flow.src,
                flow.dst,
                src_rack,
                dst_rack,
                size,
                round(flow.start_s, 6),
                round(self.now, 6),
                int(flow.elephant),
                path,
                round(ocs_bytes),
            )
        )

    def _stop(self, pair: tuple[int, int], flow: Flow, remaining: float) -> None:
        """In elephants_wait mode, the elephant connection waits for its pair's circuit from now, or breaks at
        Hadoop's read timeout."""
        self._waiting.setdefault(pair, {})[flow] = (remaining, self.now)
        self._began_waiting(pair)
        deadline = next_tick(self.now + SHUFFLE_READ_TIMEOUT_S)
        heapq.heappush(self._read_deadlines, (deadline, next(self._order), pair, flow, self.now))

    def _next_read_timeout(self) -> float:
        """When the next stopped connection times out (the deadlines of those that went on since, or stopped
        again, are dropped on the way: they cost the event loop no step)."""
        deadlines = self._read_deadlines
        while deadlines:
            _, _, pair, flow, stopped_s = deadlines[0]
            entry = self._waiting.get(pair, {}).get(flow)
            if entry is not None and entry[1] == stopped_s:
                return deadlines[0][0]
            heapq.heappop(deadlines)
        return np.inf

    def _read_timed_out(self, pair: tuple[int, int], flow: Flow) -> None:
        """The stopped connection has read nothing for SHUFFLE_READ_TIMEOUT_S: it fails as Hadoop's Fetcher
        does. The outputs it copied whole are fetched (flows.csv gets them as a connection of their own); the
        rest wait again behind the dark pair, the bytes of the one under way lost; the fetcher is free for
        another host, and the host is penalized (`ShuffleFetches.failed`)."""
        remaining, _ = self._waiting[pair].pop(flow)
        self.read_timeouts += 1
        fetches = self._reduces[flow.task.task_id]
        connection = flow.connection
        assert connection is not None
        sent, copied, kept = flow.size - remaining, 0, 0
        for source in connection.sources:
            if kept + fetches.sizes[source] > sent:
                break
            kept += fetches.sizes[source]
            copied += 1
        penalty_over = fetches.plan.failed(connection, copied)
        self._at(penalty_over, "penalty_over", (flow.task.task_id, flow.attempt))
        if copied:
            self._outputs_fetched(fetches, flow, copied, kept, min(flow.ocs_bytes, kept))
        self._pump(fetches)

    def _outputs_fetched(self, fetches: ReduceFetches, flow: Flow, copied: int, size: int, ocs_bytes: float) -> None:
        """The connection's first `copied` outputs, `size` bytes of which `ocs_bytes` by circuit, are fetched:
        flows.csv's row, the reducer's count and the scheduler's note."""
        assert flow.connection is not None
        self._log_flow(flow, size, ocs_bytes)
        fetches.fetched_bytes += size
        self.core.shuffle_fetched(flow.task.task_id, flow.attempt, flow.connection.sources[:copied])

    def _penalty_over(self, task_id: str, attempt: int) -> None:
        """A host the reducer's connection broke on is no longer penalized: its fetchers may take it again."""
        fetches = self._reduces.get(task_id)
        if fetches is not None and fetches.attempt == attempt:
            self._pump(fetches)

    # the OCS --------------------------------------------------------------------------------------
    def _ocs_tick(self, due: float) -> None:
        """A periodic reconfiguration (deferred while the previous one is still under way): the interval's
        schedule from the demand now, its first slot set up at once and the others at their offsets."""
        if self.now < self.ocs.busy_until:
            self._at(self.ocs.busy_until, "ocs_tick", due)
            return
        racks = self.scenario.fabric.racks
        hints = self.policy.ocs_demand(self.cluster) or [[0.0] * racks for _ in range(racks)]
        sent = self.flows.take_pair_bytes()
        measured = self._measured.update(sent)
        demand = combined_demand(hints, measured, self.scenario.ocs.demand_source)
        queued = self._elephants_waiting()
        if self.elephants_wait:
            for pair, left in self._queued_over_lit().items():
                queued[pair] = queued.get(pair, 0.0) + left
        for (a, b), left in queued.items():
            demand[a][b] += max(left, self._threshold)  # an elephant's, whatever is left of it
        for row in demand_rows(round(self.now, 6), sent, measured, hints, demand, self.ocs.circuits, self._threshold):
            self.logs.ocs_demand.write(row)
        first, *later = self.ocs.schedule(demand)
        self._ocs_round += 1
        self._set_circuits(first.configuration)
        for slot in later:
            self._at(self.now + slot.offset_s, "ocs_slot", (self._ocs_round, slot.configuration))
        interval = self.scenario.ocs.reconfig_interval_s
        self._at(max(due + interval, self.now + FINISH_TOLERANCE_S), "ocs_tick", due + interval)

    def _queued_over_lit(self) -> dict[tuple[int, int], float]:
        """Per lit rack pair, the elephant bytes still queued for it: what its connections have left and the outputs
        their reducers have still to open from its source rack. They were its demand while it was dark and stay
        so while they last, so a pair does not lose its circuit the moment it gets one, as the JobPacker paper's
        Fig. 2 holds a configuration for the largest entry it serves."""
        queued: dict[tuple[int, int], float] = {}
        for (a, b), flows in self.flows.steerable_by_pair().items():
            reducers = {flow.task.task_id: None for flow, _ in flows}
            to_open = sum(
                fetches.plan.waiting_by_group.get(a, 0)
                for task_id in reducers
                if (fetches := self._reduces.get(task_id)) is not None
            )
            queued[a, b] = float(round(sum(left for _, left in flows))) + to_open
        return queued

    def _elephants_waiting(self) -> dict[tuple[int, int], float]:
        """Per dark rack pair, the whole elephant bytes waiting for its circuit: those of connections it stopped and
        those its reducers' fetchers passed over (queued at the hosts: how c-Through estimates demand)."""
        waiting = {
            pair: float(round(sum(left for left, _ in flows.values())))
            for pair, flows in self._waiting.items()
            if flows
        }
        for (a, b), reducers in list(self._passed_over.items()):
            queued = 0.0
            for task_id, fetches in list(reducers.items()):
                left = fetches.plan.waiting_by_group.get(a, 0) if self._reduces.get(task_id) is fetches else 0
                if left > 0:
                    queued += left
                else:  # fetched since, or the reducer is gone (or runs again, elsewhere or not)
                    del reducers[task_id]
            if reducers:
                waiting[a, b] = waiting.get((a, b), 0.0) + queued
            else:
                del self._passed_over[a, b]
        for pair in [pair for pair in self._waits_since if pair not in waiting]:
            del self._waits_since[pair]  # nothing waits any more (its reducers ended elsewhere): no circuit came
        return waiting

    def _began_waiting(self, pair: tuple[int, int]) -> None:
        """The rack pair's elephants wait for a circuit (from now, unless they already did)."""
        self._waits_since.setdefault(pair, self.now)

    def elephant_wait_summary(self) -> dict[str, float | int | None]:
        """How long rack pairs' elephants waited for their circuits, in elephants_wait mode (nothing otherwise):
        the waits that ended (each from a pair's first elephant held back to its circuit lighting), their
        median, 95th percentile and longest, in seconds; and how many stopped connections broke at the read
        timeout."""
        if not self.elephants_wait:
            return {}
        waits = np.array(self.elephant_waits)
        stats = {"median": 50, "p95": 95, "max": 100}
        return {
            "elephant_waits": len(waits),
            "shuffle_read_timeouts": self.read_timeouts,
            **{
                f"elephant_wait_{name}_s": round(float(np.percentile(waits, q)), 3) if len(waits) else None
                for name, q in stats.items()
            },
        }

    def _ocs_slot(self, round_: int, configuration: Configuration) -> None:
        """A later slot of an interval's schedule (none once the next interval's schedule has been made)."""
        if round_ != self._ocs_round:
            return
        if self.now < self.ocs.busy_until:
            self._at(self.ocs.busy_until, "ocs_slot", (round_, configuration))
            return
        self._set_circuits(configuration)

    def _set_circuits(self, configuration: Configuration) -> None:
        left, lit_at = self.ocs.reconfigure(self.now, configuration)
        for a, b in left:
            self._reroute(a, b)
        if lit_at is not None:
            self.logs.ocs_events.write(self.ocs.events[-1].csv_row())
            self._at(lit_at, "ocs_lit", None)

    def _reroute(self, a: int, b: int) -> None:
        """Rack pair a->b's circuit lit, changed or went dark: its steerable flows move onto it or off it (in
        elephants_wait mode, off it means waiting for the next one)."""
        circuit = self.ocs.lit.get((a, b))
        if self.elephants_wait and circuit is None:
            for flow, remaining in self.flows.take_out_pair(a, b):
                self._stop((a, b), flow, remaining)
            return
        if (since := self._waits_since.pop((a, b), None)) is not None:
            self.elephant_waits.append(self.now - since)
        self.flows.reroute(a, b, circuit)
        for flow, (remaining, _) in self._waiting.pop((a, b), {}).items():
            self._start_flow(flow, remaining)
        for task_id in self._passed_over.pop((a, b), ()):
            if (fetches := self._reduces.get(task_id)) is not None:
                self._pump(fetches)
