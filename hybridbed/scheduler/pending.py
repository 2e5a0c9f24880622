"""Pending tasks of one job, per stage, a root stage's indexed by where their input lives, so a policy
finds a node-local or rack-local task in constant time however many tasks wait (15K pending tasks at a
heartbeat is the YARN Fair/Tetris figure the scheduler must keep well under a millisecond)."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet

from hybridbed.scheduler.model import StageKind, Task


class PendingStage:
    """One stage's pending tasks (insertion order: by index, requeued tasks last)."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self.by_host: dict[str, dict[str, Task]] = {}
        self.by_rack: dict[int, dict[str, Task]] = {}
        self._locations: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}

    def add(self, task: Task, rack_of: dict[str, int], alive: AbstractSet[str]) -> None:
        self.tasks[task.task_id] = task
        if task.input_block is None:
            return
        hosts = tuple(h for h in task.input_block.replicas if h in alive)
        racks = tuple(sorted({rack_of[h] for h in hosts}))
        self._locations[task.task_id] = (hosts, racks)
        for host in hosts:
            self.by_host.setdefault(host, {})[task.task_id] = task
        for rack in racks:
            self.by_rack.setdefault(rack, {})[task.task_id] = task

    def remove(self, task: Task) -> bool:
        """False when the task was not pending here."""
        if self.tasks.pop(task.task_id, None) is None:
            return False
        hosts, racks = self._locations.pop(task.task_id, ((), ()))
        for host in hosts:
            self.by_host.get(host, {}).pop(task.task_id, None)
        for rack in racks:
            self.by_rack.get(rack, {}).pop(task.task_id, None)
        return True

    def node_local(self, host: str) -> Task | None:
        tasks = self.by_host.get(host)  # asked for every job an offer passes: no dict or generator made per call
        return next(iter(tasks.values())) if tasks else None

    def rack_local(self, rack: int) -> Task | None:
        tasks = self.by_rack.get(rack)
        return next(iter(tasks.values())) if tasks else None

    def first(self) -> Task | None:
        return next(iter(self.tasks.values()), None)


class PendingTasks:
    """A job's pending tasks: per stage, and as two views, `maps` (root stages) and `reduces` (the rest)."""

    def __init__(self) -> None:
        self.stages: dict[int, PendingStage] = {}
        self.maps: dict[str, Task] = {}
        self.reduces: dict[str, Task] = {}
        self._roots: list[PendingStage] = []
        self.revision = 0  # counts every task added or removed: what is cached of these tasks is stale when it moved

    def add(self, task: Task, rack_of: dict[str, int], alive: AbstractSet[str]) -> None:
        stage = self.stages.get(task.stage)
        if stage is None:
            stage = self.stages[task.stage] = PendingStage()
            if task.kind is StageKind.MAP:
                self._roots.append(stage)
        stage.add(task, rack_of, alive)
        (self.maps if task.kind is StageKind.MAP else self.reduces)[task.task_id] = task
        self.revision += 1

    def remove(self, task: Task) -> None:
        stage = self.stages.get(task.stage)
        if stage is not None and stage.remove(task):
            (self.maps if task.kind is StageKind.MAP else self.reduces).pop(task.task_id)
            self.revision += 1

    def forget_host(self, host: str, rack_of: dict[str, int], alive: AbstractSet[str]) -> None:
        """A host died: its replicas no longer make a map local anywhere."""
        for stage in self._roots:
            for task in list(stage.by_host.pop(host, {}).values()):
                stage.remove(task)
                stage.add(task, rack_of, alive)

    def node_local(self, host: str) -> Task | None:
        for stage in self._roots:  # a loop, not a generator: see PendingStage.node_local
            task = stage.node_local(host)
            if task is not None:
                return task
        return None

    def rack_local(self, rack: int) -> Task | None:
        return next((t for s in self._roots if (t := s.rack_local(rack)) is not None), None)

    def any_map(self) -> Task | None:
        return next(iter(self.maps.values()), None)

    def first_in(self, stages: Iterable[int]) -> Task | None:
        """The first pending task of the first of `stages` that has one."""
        return next((t for s in stages if s in self.stages and (t := self.stages[s].first()) is not None), None)

    def waiting(self, stages: Iterable[int]) -> list[int]:
        """Those of `stages` with pending tasks."""
        return [s for s in stages if s in self.stages and self.stages[s].tasks]

    def __len__(self) -> int:
        return len(self.maps) + len(self.reduces)
