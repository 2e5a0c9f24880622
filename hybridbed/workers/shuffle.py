"""Which map outputs a reducer fetches next, and over which connection: Hadoop's shuffle scheduling,
shared by the emulated workers and the simulator.

Hadoop's reducer (ShuffleSchedulerImpl and its Fetcher threads) runs `mapreduce.reduce.shuffle.parallelcopies`
fetchers. A fetcher takes a host that has completed map outputs for the reducer and no other fetcher on it,
and copies up to MAX_MAPS_AT_ONCE of that host's outputs over one connection, one after the other; outputs
that complete later on the same host go over a later connection. So a reducer holds at most one
connection per map host and at most PARALLEL_FETCHES in all, however many maps its job has. A connection that
breaks penalizes its host: no fetcher takes the host again until the penalty is over (ShuffleSchedulerImpl's
copyFailed), however soon its outputs could be copied.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Collection, Container, Hashable, Iterator
from dataclasses import dataclass, field

from hybridbed.config.constants import PARALLEL_FETCHES

# Hadoop's ShuffleSchedulerImpl.MAX_MAPS_AT_ONCE: map outputs one fetch connection copies at most.
MAX_OUTPUTS_PER_CONNECTION = 20
# A broken connection's host is penalized for PENALTY_S * PENALTY_GROWTH ** failures (the failed copies of the
# output it was copying, this one included), at most MAX_PENALTY_S: ShuffleSchedulerImpl's INITIAL_PENALTY
# (10,000 ms) and PENALTY_GROWTH_RATE (1.3), and mapreduce.reduce.shuffle.retry-delay.max.ms (60,000 ms).
PENALTY_S = 10.0
PENALTY_GROWTH = 1.3
MAX_PENALTY_S = 60.0


def penalty_s(failures: int) -> float:
    """How long a host is penalized after a connection broke copying an output that has now failed `failures`
    times."""
    return min(PENALTY_S * PENALTY_GROWTH**failures, MAX_PENALTY_S)


@dataclass(frozen=True)
class Connection:
    """One fetch connection: these parent tasks' outputs, from one host, in this order."""

    host: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class GroupTally:
    """How map hosts are grouped and their outputs sized: the simulator groups hosts by rack, and the bytes
    queued for a rack pair are the demand c-Through measures."""

    group_of: Callable[[str], Hashable]
    size_of: Callable[[str], int]  # a parent's output -> its bytes


@dataclass
class ShuffleFetches:
    """A reducer's view of its parents' outputs: where each one is, which wait, which are under way."""

    parallel: int = PARALLEL_FETCHES
    per_connection: int = MAX_OUTPUTS_PER_CONNECTION
    location: dict[str, str] = field(default_factory=dict)  # parent task -> the host its output is on now
    fetched: set[str] = field(default_factory=set)
    in_flight: dict[str, Connection] = field(default_factory=dict)  # host -> its open connection
    tally: GroupTally | None = None  # None: no bytes tallied per group, no `open_passing_over`
    clock: Callable[[], float] = time.monotonic  # the penalties' clock (the simulator gives its own)
    failures: dict[str, int] = field(default_factory=dict)  # parent task -> its failed copies, until one succeeds
    penalized: dict[str, float] = field(default_factory=dict)  # host -> when its penalty is over
    waiting_by_group: dict[Hashable, int] = field(default_factory=dict)  # bytes of the outputs waiting, per group
    _waiting: dict[str, dict[str, None]] = field(default_factory=dict)  # host -> its outputs to fetch, in order
    # with a tally: each waiting host's place in `_waiting`'s order, and the waiting hosts of each group in it
    _place: dict[str, int] = field(default_factory=dict)
    _group_hosts: dict[Hashable, dict[str, None]] = field(default_factory=dict)
    _places: Iterator[int] = field(default_factory=itertools.count)

    def announce(self, source: str, host: str) -> None:
        """A parent's output is on `host` (again, when the parent ran once more elsewhere)."""
        if source in self.fetched:
            return
        old = self.location.get(source)
        self.location[source] = host
        if old is None:  # first told: on no connection yet
            self._wait(host, source)
            return
        if old != host and source in self._waiting.get(old, ()):
            self._unwait(old, (source,))
        if not self._on_connection(source):
            self._wait(host, source)

    def open(self, backing_off: Container[str] = ()) -> list[Connection]:
        """The connections to open now: hosts with outputs waiting, no connection, no penalty and not
        `backing_off` (out of reach for now), in the order their first output was announced, while fewer than
        `parallel` are open."""
        room = self.parallel - len(self.in_flight)
        if room <= 0:
            return []
        hosts = []
        penalized = self._penalized_now()
        for host in self._waiting:
            if host not in self.in_flight and host not in penalized and host not in backing_off:
                hosts.append(host)
                if len(hosts) == room:
                    break
        return self._connect(hosts)

    def open_passing_over(self, dark: Collection[Hashable]) -> tuple[list[Connection], list[Hashable]]:
        """As `open`, passing over the hosts of the `dark` groups; also the dark groups a walk in `open`'s order
        would have passed a host of before it was done, in the order it would have met them. The walk itself
        is not taken: a reducer waiting for circuits has most of its map hosts behind dark pairs, and `open`
        asked after each of them at every call. Each group's own hosts are in that order, so the hosts to
        open are the first `room` among the first `room` of every other group."""
        if self.tally is None:
            raise ValueError("open_passing_over needs a tally: it passes over hosts by their group")
        room = self.parallel - len(self.in_flight)
        if room <= 0:
            return [], []
        in_flight, place, penalized = self.in_flight, self._place, self._penalized_now()
        dark_firsts = []  # (place, group): each dark group's first host without a connection
        candidates = []  # (place, host): each other group's first `room` hosts without a connection
        for group, hosts in self._group_hosts.items():
            passed_over = group in dark
            taken = 0
            for host in hosts:
                if host in in_flight or host in penalized:
                    continue
                if passed_over:
                    dark_firsts.append((place[host], group))
                    break
                candidates.append((place[host], host))
                taken += 1
                if taken == room:
                    break
        chosen = [host for _, host in heapq.nsmallest(room, candidates)]
        walked_to = place[chosen[-1]] if len(chosen) == room else math.inf
        passed = [group for at, group in sorted(dark_firsts) if at < walked_to]
        return self._connect(chosen), passed

    def _connect(self, hosts: list[str]) -> list[Connection]:
        opened = []
        for host in hosts:
            sources = tuple(itertools.islice(self._waiting[host], self.per_connection))
            self._unwait(host, sources)
            connection = self.in_flight[host] = Connection(host, sources)
            opened.append(connection)
        return opened

    def done(self, connection: Connection) -> None:
        """The connection copied all its outputs."""
        del self.in_flight[connection.host]
        self._fetched(connection.sources)

    def failed(self, connection: Connection, copied: int = 0) -> float:
        """The connection broke after copying its first `copied` outputs whole: those are fetched (Hadoop's
        Fetcher reports each output's copy as it ends), the others wait again, at the location announced last.
        The output it was copying counts a failure, and its host is penalized for `penalty_s` of that output's
        failures (Hadoop counts every output of a connection that never connected; the host's penalty then
        ends with the shortest of theirs, the same on a first failure). Returns when the penalty is over."""
        del self.in_flight[connection.host]
        self._fetched(connection.sources[:copied])
        for source in connection.sources[copied:]:
            self._wait(self.location[source], source)
        failing = connection.sources[min(copied, len(connection.sources) - 1)]
        failures = self.failures[failing] = self.failures.get(failing, 0) + 1
        until = self.penalized[connection.host] = self.clock() + penalty_s(failures)
        return until

    def _fetched(self, sources: tuple[str, ...]) -> None:
        self.fetched.update(sources)
        if self.failures:  # a copy that succeeds clears its output's failures (copySucceeded)
            for source in sources:
                self.failures.pop(source, None)

    def _penalized_now(self) -> dict[str, float]:
        """The hosts whose penalty is not over (those whose penalty is over are let go; the clock is not read
        while no host is penalized, as in nearly every call)."""
        if self.penalized:
            now = self.clock()
            for host in [host for host, until in self.penalized.items() if until <= now]:
                del self.penalized[host]
        return self.penalized

    def _wait(self, host: str, source: str) -> None:
        waiting = self._waiting.get(host)
        if waiting is None:
            waiting = self._waiting[host] = {}
            if self.tally is not None:
                self._place[host] = next(self._places)
                self._group_hosts.setdefault(self.tally.group_of(host), {})[host] = None
        if source in waiting:  # told again: it keeps its place
            return
        waiting[source] = None
        if self.tally is not None:
            group = self.tally.group_of(host)
            self.waiting_by_group[group] = self.waiting_by_group.get(group, 0) + self.tally.size_of(source)

    def _unwait(self, host: str, sources: tuple[str, ...]) -> None:
        waiting = self._waiting[host]
        if len(sources) == len(waiting):  # all of them, as a connection takes when per_connection or fewer wait
            waiting.clear()
        else:
            for source in sources:
                del waiting[source]
        if self.tally is not None:
            group = self.tally.group_of(host)
            self.waiting_by_group[group] -= sum(map(self.tally.size_of, sources))
        if not waiting:  # a host with nothing waiting is not offered to a fetcher
            del self._waiting[host]
            if self.tally is not None:
                del self._place[host]
                hosts = self._group_hosts[group]
                del hosts[host]
                if not hosts:
                    del self._group_hosts[group]

    def _on_connection(self, source: str) -> bool:
        return any(source in c.sources for c in self.in_flight.values())
