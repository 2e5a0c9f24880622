"""The scheduler core: job and task bookkeeping, slowstart, lost hosts, and the calls into the policy.

It knows nothing of sockets, processes or time sources: a backend (the emulation's scheduler process,
or the flow-level simulator) feeds it events with their times and carries out what it returns.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.model import Job, Resources, StageKind, Task, TaskAction, TaskState
from hybridbed.scheduler.pending import PendingTasks
from hybridbed.scheduler.placement import place_job_input
from hybridbed.scheduler.policy import Policy
from hybridbed.scheduler.transfers import remote_read_load

ON_HOST = (TaskState.RUNNING, TaskState.SUSPENDED)  # a task that holds a container
# Resources.vector()'s dimensions, in order
DIMENSIONS = ("cores", "memory_mb", "disk_read_mbps", "disk_write_mbps", "net_in_mbps", "net_out_mbps")


class PolicyError(RuntimeError):
    """The policy returned a task it may not start there (not pending, reducers not released, no room)."""


@dataclass(frozen=True)
class Launch:
    task: Task
    host: str


@dataclass(frozen=True)
class ShuffleNotice:
    """Tell a running task where the outputs of some of its parent tasks are and their sizes (a later notice
    for the same parent supersedes it), and which belong to elephants: (job, source rack, consumer rack)
    aggregates whose announced bytes have reached the elephant threshold (JobPacker §2.2), which steering
    mode `elephant` lets ride a circuit. The lists run in parallel, one entry per parent task."""

    consumer: Task
    sources: list[Task]
    sizes: list[int]
    elephants: list[bool]


class SchedulerCore:
    def __init__(self, policy: Policy, cluster: ClusterState, rng: random.Random, replicas: int = 3):
        """`rng` places the jobs' input blocks, job after job as they arrive; the offer rounds' host order draws
        from a stream of its own (`_offer_order`)."""
        self.policy = policy
        self.cluster = cluster
        self.rng = rng
        self._offer_rng: random.Random | None = None  # from the first offer round on
        self.replicas = replicas
        self.tasks: dict[str, Task] = {}
        self.finished: list[Job] = []
        # consumer -> parent task -> the attempt whose output it was told of (an attempt runs on one host)
        self._told: dict[str, dict[str, int]] = {}
        # per running job: shuffle bytes announced per (source rack, consumer rack)
        self._announced: dict[str, dict[tuple[int, int], int]] = {}
        self._sources: dict[str, str] = {}  # running map -> the host it reads its block from
        # per job, what happened since its last notices: tasks with children finished, tasks with parents
        # started (in order)
        self._news: dict[str, tuple[list[Task], list[Task]]] = {}

    # arrivals and launches ------------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> None:
        """A job arrives: place its input (where the policy wants the first replicas) and queue its tasks."""
        self.cluster.now = now
        racks = self.policy.input_racks(job, self.cluster)
        place_job_input(job, self.cluster.hosts_by_rack(), self.rng, self.replicas, racks)
        self.cluster.jobs[job.job_id] = job
        pending = self.cluster.pending[job.job_id] = PendingTasks()
        rack_of, alive = self.cluster.rack_of, self.cluster.alive()
        for stage in job.root_stages:
            job.stage_ready_s[stage] = now
        for task in job.tasks:
            self.tasks[task.task_id] = task
            task.queued_s = now
            pending.add(task, rack_of, alive)
        self.cluster.update_launchable(job)
        self.policy.job_arrived(job, self.cluster)

    def schedule(self, now: float, hosts: list[str] | None = None) -> list[Launch]:
        """Ask the policy to fill the free containers of `hosts` (default: every host, in random order);
        returns what to start where. Hosts take one task per round, round after round until none takes
        more (YARN's one container per node heartbeat): a job's tasks spread over hosts instead of
        filling one host's containers, whose single NIC would then carry all their traffic."""
        self.cluster.now = now
        if not self.cluster.launchable:
            return []  # no policy can start anything
        launches = []
        if hosts is None:
            free = self._offer_order([h for h in self.cluster.hosts.values() if h.free_slots > 0])
        else:
            free = [self.cluster.hosts[name] for name in hosts]
        with self.policy.offer_round(self.cluster):
            while free and self.cluster.launchable:
                taking = []
                for host in free:
                    task = self.policy.next_task(host, self.cluster) if self.cluster.launchable else None
                    if task is None:
                        continue
                    allocation = self.policy.launch_share(task, host, self.cluster) or self.cluster.placed_task_demand(
                        task, host.name
                    )
                    self._check_launch(task, host, allocation)
                    self._start(task, host, now, allocation)
                    launches.append(Launch(task, host.name))
                    if host.free_slots > 0:
                        taking.append(host)
                free = taking
        return launches

    def _offer_order(self, free: list[HostState]) -> list[HostState]:
        """The hosts in random order. The draws come from their own stream, which starts where the placements'
        stands at the first offer round: so a job's blocks land where they would whatever the offer rounds drew
        before it arrived, the same under every policy and on both backends (whose offer rounds differ in number
        and in the hosts free at each), and a run whose jobs all arrive before the first offer round draws as
        when one stream served both."""
        if self._offer_rng is None:
            self._offer_rng = random.Random()
            self._offer_rng.setstate(self.rng.getstate())
        self._offer_rng.shuffle(free)
        return free

    def _check_launch(self, task: Task, host: HostState, allocation: Resources) -> None:
        if task.state is not TaskState.PENDING or task.job_id not in self.cluster.jobs:
            raise PolicyError(f"policy {self.policy.name} chose {task.task_id}, which is {task.state.value}")
        job = self.cluster.jobs[task.job_id]
        if task.kind is StageKind.REDUCE and not self.cluster.stage_released(job, task.stage):
            raise PolicyError(f"policy {self.policy.name} chose {task.task_id} before its parent stages released it")
        if not host.can_run(task, allocation, self.policy.allocates_cores):
            raise PolicyError(f"policy {self.policy.name} chose {task.task_id} for {host.name}, which has no room")
        self._check_share_shape(task, task.demand, allocation)

    def _start(self, task: Task, host: HostState, now: float, allocation: Resources | None = None) -> None:
        job = self.cluster.jobs[task.job_id]
        self.cluster.pending[job.job_id].remove(task)
        ready = job.stage_ready_s[task.stage]
        if ready is None:
            job.disorders += 1  # its parents are not done: it waits for their outputs in its container
        else:
            task.waited_s += max(0.0, now - max(ready, task.queued_s))
        task.state, task.host, task.started_s, task.paused_s = TaskState.RUNNING, host.name, now, 0.0
        task.allocation = allocation or self.cluster.placed_task_demand(task, host.name)
        task.launch_cores = task.allocation.cores
        host.start(task)
        load = remote_read_load(task.demand)
        source = self.cluster.read_source(task, host.name) if load.net_out_mbps else None
        if source is not None:  # a remote read with an allotted rate also takes bandwidth where the block is
            self.cluster.hosts[source].hold(task.task_id, load)
            self._sources[task.task_id] = source
        job.task_started(task)
        self.cluster.update_launchable(job)
        if task.kind is StageKind.REDUCE:
            self._news.setdefault(job.job_id, ([], []))[1].append(task)
        if job.started_s is None:
            job.started_s = now

    # completions and losses -----------------------------------------------------------------------
    def task_finished(self, task_id: str, attempt: int, now: float) -> Job | None:
        """A task reported success; returns its job if that finished the job. Stale attempts are ignored."""
        task = self.tasks[task_id]
        if task.state not in ON_HOST or task.attempt != attempt:
            return None
        job = self.cluster.jobs[task.job_id]
        self._leave_hosts(task)
        job.task_stopped(task)
        task.state, task.finished_s = TaskState.DONE, now
        job.task_done(task.stage)
        for child in job.stages[task.stage].children:
            if job.stage_ready_s[child] is None and self.cluster.dependencies_met(job, child):
                job.stage_ready_s[child] = now
        if job.stages[task.stage].children:
            self._news.setdefault(job.job_id, ([], []))[0].append(task)
            self.cluster.update_launchable(job)  # it may have released a child stage
        if job.done:
            job.finished_s = now
            del self.cluster.jobs[job.job_id]
            del self.cluster.pending[job.job_id]
            self.cluster.update_launchable(job)  # done: no longer launchable
            self.cluster.finished.add(job.job_id)
            for reduce in job.reduces:
                self._told.pop(reduce.task_id, None)
            self._news.pop(job.job_id, None)
            self._announced.pop(job.job_id, None)
            self.finished.append(job)
            return job
        return None

    def host_lost(self, name: str, now: float) -> list[Task]:
        """A host stopped answering: requeue its running tasks and the finished tasks whose output it held
        (while a child stage of theirs still has tasks to feed). Returns the requeued tasks."""
        self.cluster.now = now
        host = self.cluster.hosts[name]
        self.cluster.lose_host(name)
        requeued = list(host.running.values())
        host.clear()
        for job in self.cluster.jobs.values():
            for stage in job.stages:
                if any(t.state is not TaskState.DONE for c in stage.children for t in job.stages[c].tasks):
                    requeued += [t for t in stage.tasks if t.state is TaskState.DONE and t.host == name]
        rack_of, alive = self.cluster.rack_of, self.cluster.alive()
        for pending in self.cluster.pending.values():
            pending.forget_host(name, rack_of, alive)
        for task in requeued:  # each requeue re-judges the job's launchability: a lost output may un-release a stage
            if task.state in ON_HOST:
                self._stop_and_requeue(task)
            else:
                self.cluster.jobs[task.job_id].task_undone(task.stage)
                self._requeue(task)
        return requeued

    def task_failed(self, task_id: str, attempt: int, now: float) -> bool:
        """A task attempt failed on a live host: run it again. False for a stale attempt."""
        task = self.tasks[task_id]
        if task.state not in ON_HOST or task.attempt != attempt:
            return False
        self.cluster.now = now
        self._stop_and_requeue(task)
        return True

    def _stop_and_requeue(self, task: Task) -> None:
        """A task on a host (running or suspended) is to run again from scratch: a failure, a loss, a kill."""
        self._leave_hosts(task)
        self.cluster.jobs[task.job_id].task_stopped(task)
        self._requeue(task)

    def _leave_hosts(self, task: Task) -> None:
        """A running (or suspended) task ends: free its container and what it held where it read from."""
        self.cluster.suspended.pop(task.task_id, None)
        self.cluster.hosts[task.host].stop(task.task_id)
        source = self._sources.pop(task.task_id, None)
        if source is not None:
            self.cluster.hosts[source].release(task.task_id)

    def _requeue(self, task: Task) -> None:
        self._end_suspension(task)
        task.state, task.host, task.started_s, task.finished_s = TaskState.PENDING, None, None, None
        task.queued_s = self.cluster.now
        task.attempt += 1
        if task.kind is StageKind.REDUCE:
            self._told.pop(task.task_id, None)
            task.fetched.clear()
        self.cluster.pending[task.job_id].add(task, self.cluster.rack_of, self.cluster.alive())
        self.cluster.update_launchable(self.cluster.jobs[task.job_id])

    # preemption and live shares -------------------------------------------------------------------
    def act(self, now: float) -> list[TaskAction]:
        """The policy's preemptions, then its share changes, carried out in the bookkeeping; the backend then
        freezes, thaws, kills or re-quotas and re-paces the tasks."""
        return self._preempt(now) + self._set_shares(now)

    def _preempt(self, now: float) -> list[TaskAction]:
        self.cluster.now = now
        done = []
        for preemption in self.policy.preempt(self.cluster):
            task = preemption.task
            done.append(TaskAction(task, task.attempt, task.host or "", preemption.action))
            if task.job_id not in self.cluster.jobs:
                raise PolicyError(f"policy {self.policy.name} preempts {task.task_id}, whose job is done")
            job, host = self.cluster.jobs[task.job_id], self.cluster.hosts.get(task.host or "")
            if preemption.action == "suspend":
                self._expect(task, TaskState.RUNNING, "suspend")
                kept = Resources(0, task.allocation.memory_mb)
                self.cluster.suspended[task.task_id] = task.allocation
                self._reallocate(task, job, host, kept)
                task.state, task.suspended_s = TaskState.SUSPENDED, now
            elif preemption.action == "resume":
                self._expect(task, TaskState.SUSPENDED, "resume")
                held = self.cluster.suspended[task.task_id]
                if not Resources(held.cores, 0).allocatable_in(host.free):
                    raise PolicyError(
                        f"policy {self.policy.name} resumes {task.task_id} on {host.name}, "
                        f"which has not {held.cores:g} cores free"
                    )
                del self.cluster.suspended[task.task_id]
                self._reallocate(task, job, host, held)
                self._end_suspension(task)
                task.state = TaskState.RUNNING
            else:
                if task.state not in ON_HOST:
                    raise PolicyError(f"policy {self.policy.name} kills {task.task_id}, which is {task.state.value}")
                self._stop_and_requeue(task)
        return done

    def _set_shares(self, now: float) -> list[TaskAction]:
        self.cluster.now = now
        done = []
        for share in self.policy.shares(self.cluster):
            task, new = share.task, share.allocation
            self._expect(task, TaskState.RUNNING, "change the share of")
            host = self.cluster.hosts[task.host]
            self._check_share_shape(task, task.allocation, new)
            for name, wanted, room, capacity in zip(
                DIMENSIONS, new.vector(), host.room_for(task).vector(), host.capacity.vector()
            ):
                if wanted < 0 or (name == "cores" or capacity > 0) and wanted > room + 1e-9:
                    raise PolicyError(
                        f"policy {self.policy.name} gives {task.task_id} {name} {wanted:g}; "
                        f"{room:g} are there for it on {host.name}"
                    )
            self._reallocate(task, self.cluster.jobs[task.job_id], host, new)
            done.append(TaskAction(task, task.attempt, task.host, "share", new))
        return done

    def _check_share_shape(self, task: Task, held: Resources, share: Resources) -> None:
        """A share changes a task's cores (never to none) and its rates; its memory and what it is served
        elsewhere stay as they are."""
        if (
            share.memory_mb != held.memory_mb
            or share.net_out_mbps != held.net_out_mbps
            or share.cores <= 0 < held.cores
        ):
            raise PolicyError(
                f"policy {self.policy.name} gives {task.task_id} {share}: a share changes cores "
                f"(above 0) and rates, not memory"
            )

    def _end_suspension(self, task: Task) -> None:
        """A suspended task runs again or is requeued: its time suspended counts as waiting."""
        if task.suspended_s is not None:
            task.waited_s += self.cluster.now - task.suspended_s
            task.paused_s += self.cluster.now - task.suspended_s
            task.suspended_s = None

    def _expect(self, task: Task, state: TaskState, verb: str) -> None:
        if task.state is not state:
            raise PolicyError(f"policy {self.policy.name} tries to {verb} {task.task_id}, which is {task.state.value}")

    def _reallocate(self, task: Task, job: Job, host: HostState, allocation: Resources) -> None:
        host.reallocate(task, allocation)
        job.task_reallocated(task.allocation, allocation)
        task.allocation = allocation
        self.cluster.update_launchable(job)

    # shuffle --------------------------------------------------------------------------------------
    def shuffle_fetched(self, consumer_id: str, attempt: int, source_ids: Iterable[str]) -> None:
        """A running task has these parent tasks' partitions (what is left to fetch feeds OCS demand hints)."""
        task = self.tasks[consumer_id]
        if task.state in ON_HOST and task.attempt == attempt:
            task.fetched.update(dict.fromkeys(source_ids))

    def shuffle_notices(self) -> list[ShuffleNotice]:
        """Outputs of finished tasks that their running consumers have not been told about, for jobs whose
        shuffle is released.

        Only what changed since a job's last notices is looked at (tasks with children finished, tasks
        with parents started), so a call costs the notices it returns, not the size of the jobs."""
        notices = []
        for job_id in list(self._news):
            job = self.cluster.jobs[job_id]
            if not any(r.state in ON_HOST for r in job.reduces):
                del self._news[job_id]  # a consumer that starts later brings the job back
                continue
            if not self.policy.release_shuffle(job, self.cluster):
                continue
            new_sources, new_consumers = self._news.pop(job_id)
            notices += self._classify(job, self._untold(job, new_sources, new_consumers))
        return notices

    def _untold(
        self, job: Job, new_sources: list[Task], new_consumers: list[Task]
    ) -> dict[str, tuple[Task, list[Task]]]:
        """Consumer -> (consumer, its sources to tell): the (consumer, source) pairs among those of new
        consumers and new sources whose consumer is on a host and has not been told the source's current
        output (each consumer's sources in the order first found: its own as a new consumer, then the new
        sources'), recorded as told."""
        done, stages, told = TaskState.DONE, job.stages, self._told
        untold: dict[str, tuple[Task, list[Task]]] = {}
        for consumer in new_consumers:
            if consumer.state in ON_HOST:
                told_consumer = told.setdefault(consumer.task_id, {})
                sources = []
                for source in job.sources_of(consumer):
                    if source.state is done and told_consumer.get(source.task_id) != source.attempt:
                        told_consumer[source.task_id] = source.attempt
                        sources.append(source)
                if sources:
                    untold.setdefault(consumer.task_id, (consumer, []))[1].extend(sources)
        for source in new_sources:
            if source.state is not done:
                continue
            attempt = source.attempt
            for child in stages[source.stage].children:
                for consumer in stages[child].tasks:
                    if consumer.state in ON_HOST:
                        told_consumer = told.setdefault(consumer.task_id, {})
                        if told_consumer.get(source.task_id) != attempt:
                            told_consumer[source.task_id] = attempt
                            untold.setdefault(consumer.task_id, (consumer, []))[1].append(source)
        return untold

    def _classify(self, job: Job, untold: dict[str, tuple[Task, list[Task]]]) -> list[ShuffleNotice]:
        """A notice per consumer with sources to tell, each source an elephant if its (job, source rack,
        consumer rack) aggregate is one the policy planned as an elephant (JobPacker's aggregated shuffle, §4.2),
        or if it has reached the elephant threshold counting every byte announced so far with these (a pair
        that crosses it stays an elephant; bytes announced before it crossed went as mice)."""
        rack_of = self.cluster.rack_of
        announced = self._announced.setdefault(job.job_id, {})
        told = []  # (consumer, sources, their sizes, their rack pairs)
        for consumer, sources in untold.values():
            sizes = [source.partition_for(consumer) for source in sources]
            consumer_rack = rack_of[consumer.host]
            pairs = [(rack_of[source.host], consumer_rack) for source in sources]
            for pair, size in zip(pairs, sizes, strict=True):
                announced[pair] = announced.get(pair, 0) + size
            told.append((consumer, sources, sizes, pairs))
        threshold = self.cluster.network.elephant_bytes if self.cluster.network else math.inf
        elephant = {
            pair: pair[0] != pair[1] and (announced[pair] >= threshold or self.policy.planned_elephant(job, *pair))
            for pair in {pair for *_, pairs in told for pair in pairs}
        }
        return [
            ShuffleNotice(consumer, sources, sizes, [elephant[pair] for pair in pairs])
            for consumer, sources, sizes, pairs in told
        ]
