"""Pending tasks of one job, indexed by where their input lives, so a policy finds a node-local or
rack-local map in constant time however many tasks wait (15K pending tasks at a heartbeat is the
YARN Fair/Tetris figure the scheduler must keep well under a millisecond)."""
from __future__ import annotations

from hybridbed.scheduler.model import StageKind, Task


class PendingTasks:
    def __init__(self) -> None:
        self.maps: dict[str, Task] = {}  # insertion order: by index
        self.reduces: dict[str, Task] = {}
        self.by_host: dict[str, dict[str, Task]] = {}
        self.by_rack: dict[int, dict[str, Task]] = {}
        self._locations: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}

    def add(self, task: Task, rack_of: dict[str, int], alive: set[str]) -> None:
        if task.kind is StageKind.REDUCE:
            self.reduces[task.task_id] = task
            return
        self.maps[task.task_id] = task
        hosts = tuple(h for h in (task.input_block.replicas if task.input_block else ()) if h in alive)
        racks = tuple(sorted({rack_of[h] for h in hosts}))
        self._locations[task.task_id] = (hosts, racks)
        for host in hosts:
            self.by_host.setdefault(host, {})[task.task_id] = task
        for rack in racks:
            self.by_rack.setdefault(rack, {})[task.task_id] = task

    def remove(self, task: Task) -> None:
        if task.kind is StageKind.REDUCE:
            self.reduces.pop(task.task_id, None)
            return
        if self.maps.pop(task.task_id, None) is None:
            return
        hosts, racks = self._locations.pop(task.task_id)
        for host in hosts:
            self.by_host.get(host, {}).pop(task.task_id, None)
        for rack in racks:
            self.by_rack.get(rack, {}).pop(task.task_id, None)

    def forget_host(self, host: str, rack_of: dict[str, int], alive: set[str]) -> None:
        """A host died: its replicas no longer make a map local anywhere."""
        for task in list(self.by_host.pop(host, {}).values()):
            self.remove(task)
            self.add(task, rack_of, alive)

    def node_local(self, host: str) -> Task | None:
        return next(iter(self.by_host.get(host, {}).values()), None)

    def rack_local(self, rack: int) -> Task | None:
        return next(iter(self.by_rack.get(rack, {}).values()), None)

    def any_map(self) -> Task | None:
        return next(iter(self.maps.values()), None)

    def any_reduce(self) -> Task | None:
        return next(iter(self.reduces.values()), None)

    def __len__(self) -> int:
        return len(self.maps) + len(self.reduces)
