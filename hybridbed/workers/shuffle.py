"""Which map outputs a reducer fetches next, and over which connection: Hadoop's shuffle scheduling,
shared by the emulated workers and the simulator.

Hadoop's reducer (ShuffleSchedulerImpl and its Fetcher threads) runs `mapreduce.reduce.shuffle.parallelcopies`
fetchers. A fetcher takes a host that has completed map outputs for the reducer and no other fetcher on it,
drawn at random among all such hosts (ShuffleSchedulerImpl.getHost), and copies up to MAX_MAPS_AT_ONCE of that
host's outputs over one connection, one after the other; outputs that complete later on the same host go over
a later connection. The draw spreads a job's reducers over its map hosts: taken in the order the outputs were
announced, every reducer would start at the same few hosts when many maps end together. So a reducer holds at most one
connection per map host and at most PARALLEL_FETCHES in all, however many maps its job has. A connection that
breaks penalizes its host: no fetcher takes the host again until the penalty is over (ShuffleSchedulerImpl's
copyFailed), however soon its outputs could be copied.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import random
import time
from collections.abc import Callable, Collection, Hashable, Iterable
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


def fetch_order(seed: int, task_id: str, attempt: int) -> random.Random:
    """The draws of one reducer attempt's fetchers: fixed by the run's seed and the attempt, so that a simulated
    run is reproducible to the byte and a rerun reducer draws afresh."""
    return random.Random(f"{seed}/{task_id}/{attempt}")


def penalty_s(failures: int) -> float:
    """How long a host is penalized after a connection broke copying an output that has now failed `failures`
    times."""
    return min(PENALTY_S * PENALTY_GROWTH**failures, MAX_PENALTY_S)


@dataclass(frozen=True)
class Connection:
    """One fetch connection: these parent tasks' outputs, from one host, in this order."""

    host: str
    sources: tuple[str, ...]


class HostPool:
    """Hosts to draw from at random: a list, and each host's place in it (a host leaves by swapping with the
    last), so that adding, removing and drawing take constant time however many map hosts a job has."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self._at: dict[str, int] = {}

    def add(self, host: str) -> None:
        if host not in self._at:
            self._at[host] = len(self.hosts)
            self.hosts.append(host)

    def discard(self, host: str) -> bool:
        """Take the host out; False if it was not in."""
        at = self._at.pop(host, None)
        if at is None:
            return False
        last = self.hosts.pop()
        if last != host:
            self.hosts[at] = last
            self._at[last] = at
        return True


_hosts_of = operator.attrgetter("hosts")  # a HostPool's hosts


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
    # which host a free fetcher takes; callers seed it per reducer attempt (`fetch_order`)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    _waiting: dict[str, dict[str, None]] = field(default_factory=dict)  # host -> its outputs to fetch, in order
    # the hosts with outputs waiting and no connection, per group (all in group None without a tally)
    _free: dict[Hashable, HostPool] = field(default_factory=dict)

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
            if old not in self._waiting:  # nothing left there: no fetcher draws it
                self._leave_free(old)
        if not self._on_connection(source):
            self._wait(host, source)

    def open(self) -> list[Connection]:
        """The connections to open now, while fewer than `parallel` are open: each free fetcher draws a host
        with outputs waiting, no connection and no penalty."""
        return self._connect(self._draw(()))

    def open_passing_over(self, dark: Collection[Hashable]) -> tuple[list[Connection], list[Hashable]]:
        """As `open`, passing over the hosts of the `dark` groups (their outputs cannot be copied for now); also
        those of the dark groups a fetcher could have drawn a host of (a host with outputs waiting, no
        connection and no penalty), in the order their free hosts came. Drawing at random, the
        reducer's fetchers meet every such group: the reducer waits for each of them."""
        if self.tally is None:
            raise ValueError("open_passing_over needs a tally: it passes over hosts by their group")
        if len(self.in_flight) >= self.parallel:
            return [], []
        penalized = self._penalized_now()
        passed = list(itertools.compress(self._free, map(dark.__contains__, self._free)))
        if penalized:
            passed = [group for group in passed if any(host not in penalized for host in self._free[group].hosts)]
        return self._connect(self._draw(dark)), passed

    def _draw(self, dark: Collection[Hashable]) -> list[str]:
        """Up to the free fetchers' number of hosts, drawn without replacement and uniformly from the free hosts
        of the groups not `dark` that are not penalized, in the order the fetchers draw them."""
        room = self.parallel - len(self.in_flight)
        if room <= 0:
            return []
        # none empty; gathered without a Python step per group: a reducer's fetchers draw at every connection's
        # end, and at 10x scale its map hosts span up to 200 racks
        free: Iterable[HostPool] = self._free.values()
        if dark:
            free = itertools.compress(free, map(operator.not_, map(dark.__contains__, self._free)))
        pools = list(map(_hosts_of, free))
        penalized = self._penalized_now()
        if penalized:  # rare: only after a broken connection
            pools = [[host for host in hosts if host not in penalized] for hosts in pools]
        bounds = list(itertools.accumulate(map(len, pools)))
        total = bounds[-1] if bounds else 0
        if room >= total:
            return list(itertools.chain.from_iterable(pools))
        # an index into the pools laid end to end per fetcher, as `sample` would draw them from the hosts laid so;
        # one fetcher (a connection ended, as in most draws) takes the one index `sample` would, without its cost
        drawn = []
        for at in [self.rng.randrange(total)] if room == 1 else self.rng.sample(range(total), room):
            which = bisect.bisect_right(bounds, at)
            drawn.append(pools[which][at - (bounds[which - 1] if which else 0)])
        return drawn

    def _connect(self, hosts: list[str]) -> list[Connection]:
        opened = []
        for host in hosts:
            sources = tuple(itertools.islice(self._waiting[host], self.per_connection))
            self._unwait(host, sources)
            self._leave_free(host)  # it has a connection now
            connection = self.in_flight[host] = Connection(host, sources)
            opened.append(connection)
        return opened

    def done(self, connection: Connection) -> None:
        """The connection copied all its outputs."""
        self._close(connection, len(connection.sources))

    def failed(self, connection: Connection, copied: int = 0) -> float:
        """The connection broke after copying its first `copied` outputs whole: those are fetched (Hadoop's
        Fetcher reports each output's copy as it ends), the others wait again, at the location announced last.
        The output it was copying counts a failure, and its host is penalized for `penalty_s` of that output's
        failures (Hadoop counts every output of a connection that never connected; the host's penalty then
        ends with the shortest of theirs, the same on a first failure). Returns when the penalty is over."""
        self._close(connection, copied)
        for source in connection.sources[copied:]:
            self._wait(self.location[source], source)
        failing = connection.sources[min(copied, len(connection.sources) - 1)]
        failures = self.failures[failing] = self.failures.get(failing, 0) + 1
        until = self.penalized[connection.host] = self.clock() + penalty_s(failures)
        return until

    def _close(self, connection: Connection, copied: int) -> None:
        """The connection is over, its first `copied` outputs fetched."""
        del self.in_flight[connection.host]
        self._fetched(connection.sources[:copied])
        if connection.host in self._waiting:  # outputs that completed there since: a fetcher may draw it again
            self._free_up(connection.host)

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
            if host not in self.in_flight:
                self._free_up(host)
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
        if not waiting:  # (the caller takes a host with nothing waiting out of the free pools)
            del self._waiting[host]

    def _group(self, host: str) -> Hashable:
        return None if self.tally is None else self.tally.group_of(host)

    def _free_up(self, host: str) -> None:
        """The host has outputs waiting and no connection: a fetcher may draw it."""
        group = self._group(host)
        pool = self._free.get(group)
        if pool is None:
            pool = self._free[group] = HostPool()
        pool.add(host)

    def _leave_free(self, host: str) -> None:
        group = self._group(host)
        pool = self._free.get(group)
        if pool is not None and pool.discard(host) and not pool.hosts:
            del self._free[group]  # only groups with free hosts are looked at when fetchers draw

    def _on_connection(self, source: str) -> bool:
        return any(source in c.sources for c in self.in_flight.values())
