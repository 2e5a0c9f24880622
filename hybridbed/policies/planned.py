"""Running an offline plan: what Corral and JobPacker share at run time.

The plan gives each recurring job its map racks and reduce racks, and each rack a sequence of
(job, stage) entries in planned order. Then:
- the first replica of a planned job's input goes to one of its map racks;
- when a container frees on a rack, the first entry of the rack's sequence with a runnable task
  gets it (entries whose job has not arrived, or whose reduces slowstart has not released, are
  passed over). A map entry waits for locality as Fair's jobs do (`locality.DelayScheduling`): a
  job with no map whose block is on the host or its rack is passed over until its wait is up, so
  its maps go to the racks holding their blocks' first replicas rather than reading across racks. A planned job's tasks run only on its planned racks, and each reduce rack takes
  at most its even share of the job's reducers, so the shuffle keeps the planned rack-pair shape;
- with `hold_for_plan`, the run keeps to the plan's container booking as well as its order: a stage
  runs on a rack on at most as many containers at once as the plan booked it there, and the
  containers booked for an earlier entry's reduces that slowstart has not yet released are held
  for them rather than given to a later entry (without it, a later job's reducers, released
  earlier than planned, can take every container of a rack and hold them for waves the plan gave
  to an earlier job: docs/reproductions.md has what either reading gives);
- only when the rack's sequence has nothing runnable do unplanned (ad-hoc) jobs get the container,
  chosen by the subclass (Fair by default);
- a job planned on a rack that has lost all its hosts is run like an ad-hoc job.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import Field

from hybridbed.policies.fair import FairPolicy
from hybridbed.policies.locality import DelayScheduling, LocalityParams
from hybridbed.policies.planning.latency import JobProfile, LatencyModel
from hybridbed.policies.planning.timeline import Plan
from hybridbed.scheduler.cluster import ClusterState, HostState, NetworkView
from hybridbed.scheduler.model import Job, JobSpec, StageKind, Task, TaskState
from hybridbed.scheduler.policy import Policy

ADHOC = "adhoc"  # the ad-hoc jobs' list, among the lists pruned of finished jobs (the others are racks' sequences)
Entry = tuple[str, StageKind]  # a (job, stage) of a rack's sequence
LIVE = (TaskState.RUNNING, TaskState.SUSPENDED)  # a task that holds its container


class PlannedParams(LocalityParams):
    hold_for_plan: bool = Field(
        default=False,
        description="keep to the plan's container booking at run time: a stage takes at most the containers the "
        "plan booked it on a rack, and those booked for earlier reduces not yet released are held for them "
        "(the papers give the order of a rack's sequence only, §4.4)",
    )


class RackTally:
    """How many tasks of each planned (job, stage) hold a container on each rack: the tasks this policy
    started there, each counted while that attempt runs (or is suspended) on that rack."""

    def __init__(self) -> None:
        self._started: dict[tuple[int, str, StageKind], list[tuple[Task, int, str]]] = {}

    def started(self, rack: int, task: Task, host: str) -> None:
        self._started.setdefault((rack, task.job_id, task.kind), []).append((task, task.attempt, host))

    def holding(self, rack: int, job_id: str, kind: StageKind) -> int:
        started = self._started.get((rack, job_id, kind))
        if not started:
            return 0
        started[:] = [
            (t, attempt, host)
            for t, attempt, host in started
            if t.attempt == attempt and t.host == host and t.state in LIVE
        ]
        return len(started)


class PlannedPolicy(Policy):
    ocs_aware: bool = True  # whether the planner's latency model knows the OCS
    Params = PlannedParams
    params: PlannedParams

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        waits = {"node_delay_s": self.params.node_delay_s, "rack_delay_s": self.params.rack_delay_s}
        self.fair = FairPolicy(**waits)  # ad-hoc jobs
        self.locality = DelayScheduling(self.params)  # planned jobs' maps
        self.offline = Plan()
        self._planned_arrivals: dict[str, float] = {}  # per planned job, the arrival its plan was made for
        self.network: NetworkView | None = None  # set by plan(); run-time rules read the threshold from it
        # a rack's sequence (by rack) or the ad-hoc jobs (ADHOC) -> how many jobs had finished when last pruned
        self._pruned: dict[int | str, int] = {}
        # rack -> its sequence's entries of launchable jobs (with hold_for_plan, also the reduce entries of jobs
        # waiting for slowstart), and the cluster's launchable_changes and finished jobs they are as of
        self._launchable_entries: dict[int, tuple[tuple[int, int], list[Entry]]] = {}
        self.tally = RackTally()  # with hold_for_plan: the planned tasks holding containers, per rack
        # the ad-hoc (unplanned) jobs that arrived and had not finished when last pruned: while there are none and
        # every rack lives, the launchable jobs need not be walked
        self._adhoc: dict[str, None] = {}

    # planning -------------------------------------------------------------------------------------
    def plan(self, jobs: list[JobSpec], cluster: ClusterState) -> None:
        if cluster.network is None:
            raise ValueError(f"policy {self.name} plans with the network's rates, but the backend gave none")
        self.network = cluster.network
        self._launchable_entries.clear()  # listed from the sequences of the plan before
        recurring = [JobProfile.of(s) for s in jobs if s.recurring]
        if not recurring:
            return
        self._planned_arrivals = {job.job_id: job.arrival_s for job in recurring}  # the predicted one, if any
        model = LatencyModel(cluster.racks, cluster.containers_per_rack(), cluster.network, self.ocs_aware)
        self.offline = self.build_plan(recurring, model)

    def build_plan(self, jobs: list[JobProfile], model: LatencyModel) -> Plan:
        raise NotImplementedError

    def plan_rows(self) -> list[dict]:
        rows = []
        for p in self.offline.jobs.values():
            stages = {"map": p.maps, "reduce": p.reduces}
            arrival = round(self._planned_arrivals[p.job_id], 3)  # the one the plan was made for
            row: dict[str, object] = {"job_id": p.job_id, "predicted_arrival_s": arrival}
            for name, stage in stages.items():
                row[f"{name}_racks"] = " ".join(map(str, stage.racks)) if stage else ""
                row[f"{name}_start_s"] = round(stage.start_s, 3) if stage else ""
                row[f"{name}_end_s"] = round(stage.end_s, 3) if stage else ""
            rows.append({**row, "uses_ocs": p.uses_ocs})
        return rows

    def input_racks(self, job: Job, cluster: ClusterState) -> list[int] | None:
        planned = self.offline.jobs.get(job.job_id)
        return list(planned.maps.racks) if planned else None

    # run time -------------------------------------------------------------------------------------
    def job_arrived(self, job: Job, cluster: ClusterState) -> None:
        if job.job_id not in self.offline.jobs:
            self._adhoc[job.job_id] = None

    def next_task(self, host: HostState, cluster: ClusterState) -> Task | None:
        dead = cluster.dead_racks()
        rack, hold = host.rack, self.params.hold_for_plan
        held = 0  # containers of the rack held for earlier entries' reduces (hold_for_plan)
        chosen: Task | None = None
        for job_id, kind in self._launchable_sequence(rack, cluster):
            if not self._follows_plan(job_id, dead):
                continue
            job = cluster.jobs[job_id]
            if hold:
                booked = self.offline.widths[(rack, job_id, kind)]
                holding = self.tally.holding(rack, job_id, kind)
                if kind is StageKind.REDUCE and self._awaits_slowstart(job, cluster):
                    held += max(0, min(booked, self._reduce_share(job)) - holding)
                    continue
                if holding >= booked or job_id not in cluster.launchable:
                    continue
            if kind is StageKind.MAP:
                task = self.locality.map_for(job, host, cluster)
            else:
                task = self._reduce_for(job, host, cluster)
            if task is not None and host.can_run(task):
                chosen = task
                break
        if held and self._free_containers(rack, cluster) <= held:
            return None  # what the rack has free waits for earlier entries' reducers
        if chosen is not None:
            if hold:
                self.tally.started(rack, chosen, host.name)
            return chosen
        if not dead and not self._adhoc_unfinished(cluster):
            return None  # every job follows its plan
        adhoc = [j for j in cluster.launchable.values() if not self._follows_plan(j.job_id, dead)]
        return self.adhoc_task(host, cluster, adhoc) if adhoc else None

    @staticmethod
    def _awaits_slowstart(job: Job, cluster: ClusterState) -> bool:
        """The job has reducers that slowstart has not released yet."""
        return bool(cluster.pending[job.job_id].reduces) and not cluster.released_stages(job)

    @staticmethod
    def _free_containers(rack: int, cluster: ClusterState) -> int:
        """Containers free on the rack's live hosts."""
        return sum(cluster.hosts[h].free_slots for h in cluster.hosts_by_rack()[rack])

    def _adhoc_unfinished(self, cluster: ClusterState) -> dict[str, None]:
        """The ad-hoc jobs that arrived and have not finished (pruned when more jobs have finished)."""
        if self._adhoc and self._finished_since_pruned(ADHOC, cluster):
            self._adhoc = {job_id: None for job_id in self._adhoc if job_id not in cluster.finished}
        return self._adhoc

    def _finished_since_pruned(self, pruned: int | str, cluster: ClusterState) -> bool:
        """Whether jobs have finished since the list `pruned` (a rack's sequence, or ADHOC) was last pruned of
        finished jobs; noted as pruned now. A list is pruned only when more jobs have finished: offers come by the
        hundred thousand in a paper-scale run, jobs end by the thousand."""
        finished = len(cluster.finished)
        if self._pruned.get(pruned) == finished:
            return False
        self._pruned[pruned] = finished
        return True

    def adhoc_task(self, host: HostState, cluster: ClusterState, jobs: list[Job]) -> Task | None:
        return self.fair.pick(host, cluster, jobs)

    def _follows_plan(self, job_id: str, dead_racks: set[int]) -> bool:
        planned = self.offline.jobs.get(job_id)
        if planned is None:
            return False
        if not dead_racks:
            return True
        racks = planned.maps.racks + (planned.reduces.racks if planned.reduces else ())
        return not dead_racks.intersection(racks)

    def _sequence(self, rack: int, cluster: ClusterState) -> Iterable[tuple[str, StageKind]]:
        """The rack's sequence without the entries of finished jobs (dropped when more jobs have finished)."""
        sequence = self.offline.sequences.get(rack, [])
        if self._finished_since_pruned(rack, cluster):
            sequence = self.offline.sequences[rack] = [e for e in sequence if e[0] not in cluster.finished]
        return sequence

    def _launchable_sequence(self, rack: int, cluster: ClusterState) -> list[Entry]:
        """The entries of the rack's sequence whose job is launchable (with hold_for_plan, also the reduce entries
        of arrived jobs whose reducers wait for slowstart, with all their maps started), listed again only when
        which jobs are launchable or finished has changed: most offers find nothing to run in a sequence of dozens
        of jobs that have started all their tasks, and such offers come by the hundred thousand in a paper-scale
        run."""
        as_of = (cluster.launchable_changes, len(cluster.finished))
        listed = self._launchable_entries.get(rack)
        if listed is None or listed[0] != as_of:
            hold = self.params.hold_for_plan
            entries = [
                (job_id, kind)
                for job_id, kind in self._sequence(rack, cluster)
                if job_id in cluster.launchable
                or (hold and kind is StageKind.REDUCE and job_id in cluster.jobs and cluster.pending[job_id].reduces)
            ]
            listed = self._launchable_entries[rack] = (as_of, entries)
        return listed[1]

    def _reduce_share(self, job: Job) -> int:
        """The reducers each of the job's reduce racks takes at most: an even share."""
        return math.ceil(len(job.reduces) / len(self.offline.jobs[job.job_id].reduces.racks))

    def _reduce_for(self, job: Job, host: HostState, cluster: ClusterState) -> Task | None:
        """A released reduce, if this rack has not yet taken its even share of the job's reducers."""
        on_rack = sum(1 for r in job.reduces if r.host is not None and cluster.rack_of[r.host] == host.rack)
        return cluster.released_reduce(job) if on_rack < self._reduce_share(job) else None
