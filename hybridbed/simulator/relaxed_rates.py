"""Max-min fair rates computed over the links that bind, checked against all the others: the simulator's
rate computation.

At the paper's scale a computation covers some 18,000 flow classes, nearly all of them cross-rack flows
held back by the 40 ToR-core links; their NICs rarely bind. Solving over fewer links is a relaxation: a
flow class then stands only for the links kept, and classes that cross the same kept links (and have the
same cap) merge into one row, a few hundred to a few thousand rows instead of 18,000. The max-min fair
allocation is the lexicographic optimum of the sorted rate vector; when the relaxed problem's optimum is
feasible for the full problem (no dropped link carries more than its capacity), it is the full
problem's optimum too. So the rates are exact: a computation whose result overloads a dropped link adds
that link back and solves again, at most once per link. A class new since the last computation that crosses no
kept link would overload its links for certain: they are added before the solve.

Kept across computations (the object holds them): the links kept (those loaded to at least
KEPT_LOAD of their capacity at the last computation, plus any that overloaded since; the ones below it
are dropped every SHRINK_EVERY computations), and the merged rows, with a hash table from (kept links,
cap) to row, so a computation regroups only the classes whose path or cap changed, and each row's flows, so
it recounts only the classes whose flows changed. Each link's rows and the flows they put on it are kept up
to date as rows are added and recounted, so a solve over the rows does not list them again (a link's flows
are whole numbers, so the sums kept are exact and the rates the same as from lists made afresh), and each link's
classes, so a link kept or dropped has its classes regrouped without a pass over all of them. Where the
relaxation merges little (rack-local flows fill their NICs, as under JobPacker, and every NIC is kept),
it steps aside: bottleneck first over every class, for the next BYPASS_CALLS computations.

The measured reason for this shape rather than recomputing only the classes a change touches: in the
paper-scale Fair run 54 % of the classes change rate between consecutive computations (the ToR-core
links couple every cross-rack flow), and under JobPacker, where 5 % do, the components of the changed
rows still hold half the rows (docs/reproductions.md, simulator speed).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from hybridbed.simulator.fairshare import (
    LINK_INDEX,
    RELATIVE_TOLERANCE,
    fill_bottleneck_first,
    link_loads,
    max_min_rates,
    solver_arrays,
)

KEPT_LOAD = 0.5  # a link loaded to this share of its capacity stays in the relaxation (speed only: exact either way)
SHRINK_EVERY = 32  # computations between drops of the links loaded below KEPT_LOAD
# rows / classes above which the relaxation is not worth its checks (speed only: exact either way). A relaxed
# computation passes over the classes once and solves over the rows; bottleneck first over every class passes
# over them four times. Measured (docs/reproductions.md, simulator speed): 0.9 rather than 0.5 takes a 10x-scale
# Fair run with 3000 jobs from 260 s to 203 s and moves the paper-scale setups' times by 3 % at most; same files.
MERGE_AT_MOST = 0.9
BYPASS_CALLS = 64  # computations the relaxation then steps aside for
# rows held (with flows or not) per row with flows above which the rows without flows are dropped and the others
# laid out again (speed only: exact either way). A solve freezes a bottleneck's rows together; laid out afresh, they
# lie side by side (`_compact`), and rows without flows no longer sit between them. Measured (docs/reproductions.md,
# simulator speed): in a 10x-scale Fair run with 1000 jobs, the same 45 computations (every 250th) solved in 40.6 ms
# laid out as the rows came and rebuilt at 2, 33.4 ms in that order at 2, 25.0 ms in that order at 1.25; same files.
STALE_ROWS_AT = 1.25
ROWS_SLACK = 64  # rows a computation may hold before it compacts them or steps aside, whatever the shares above
MEMBERS_AT_FIRST = 8  # entries a link's list has room for at first (then twice as many at each growth)
_FNV_OFFSET, _FNV_PRIME = np.uint64(1469598103934665603), np.uint64(1099511628211)


class RelaxedMaxMin:
    """A run's rate computation; it keeps state between computations, so one per flow table. Called as
    `fairshare.max_min_rates` is, plus `rekeyed`: the classes whose path or cap changed since the previous
    call (None: not known, so every class is regrouped), and `recounted`: those whose flows changed (None: not
    known, so every class is recounted; those past the classes passed have no flows now). Same rates within
    RELATIVE_TOLERANCE. After a call,
    `loads` is what every link carries at those rates (the check against dropped links computes it anyway,
    and the flow table reads its core links' from it)."""

    def __init__(self) -> None:
        self.kept = np.zeros(0, dtype=np.bool_)  # per link: solved over (finite links only)
        self._regroup_all = True  # no class is merged (after a reset)
        self._toggled = np.zeros(0, dtype=np.bool_)  # links kept or dropped since the classes were merged
        self._row_of = np.zeros(0, dtype=np.int64)  # each class's merged row (-1: none)
        self._counted = np.zeros(0)  # each class's flows as its row counts them (0 without a row)
        self._table = np.zeros(0, dtype=np.int64)  # hash table: (path over the kept links, cap) -> row
        # rows' paths over the kept links (those links in path order, then the padding link), caps
        self._rows = (np.zeros((0, 0), dtype=LINK_INDEX), np.zeros(0))
        self._row_count = 0
        self._row_weights = np.zeros(0)  # each row's flows
        # per link (the padding link last), the rows that cross it and the flows they put on it, kept up to date
        # as rows are added and recounted
        self._members = _no_lists(1, 0)
        self._carried = np.zeros(1)
        # per link, the classes that cross it, kept up to date as classes are rekeyed (entries of classes rekeyed
        # since onto other paths are dropped when the link's list is read, in `_crossing`)
        self._crossers = _no_lists(0, 0)
        self._tally = np.zeros(2, dtype=np.int64)  # rows with flows, classes with flows
        self._reset_rows(1024, 0)
        self._bypass = 0  # computations left to run without the relaxation
        self.loads = np.zeros(0)
        self._padded = np.zeros(0)  # the capacities and the relaxation's padding link (infinite), last
        self.computations = 0  # the dropped links are looked at again every SHRINK_EVERY of them

    def __call__(
        self,
        paths: np.ndarray,
        capacities: np.ndarray,
        caps: np.ndarray,
        weights: np.ndarray | None = None,
        rekeyed: np.ndarray | None = None,
        recounted: np.ndarray | None = None,
    ) -> np.ndarray:
        paths, capacities, caps, weights = solver_arrays(paths, capacities, caps, weights)
        self.computations += 1
        self._fit(paths, capacities.size)
        crossers = self._crossers
        if rekeyed is None or crossers.start.size != capacities.size or not _index(paths, rekeyed, crossers):
            self._index_every_class(paths, capacities.size)
        if self._bypass > 0:
            self._bypass -= 1
            rates = self._every_class(paths, capacities, caps, weights)
            if self._bypass == 0:  # back to the relaxation, over the links that bind now
                self._keep_loaded(self.loads, capacities)
                self._reset_rows(self._rows[1].size, paths.shape[1])  # classes rekeyed meanwhile were not merged
            return rates
        classes = paths.shape[0]
        if self._padded.size != capacities.size + 1:
            self._padded = np.full(capacities.size + 1, np.inf)  # the relaxation's padding link: the last
        self._padded[:-1] = capacities
        rates = np.empty(classes)
        if rekeyed is None:
            self._reset_rows(self._rows[1].size, paths.shape[1])
            rekeyed = np.zeros(0, dtype=np.int64)
        if recounted is None:
            recounted = np.arange(self._counted.size)
        row_paths, row_caps = self._rows
        # classes new since the last computation that cross no kept link: their links are kept now
        _keep_unbound(paths, caps, weights, rekeyed, capacities, self.kept, self._toggled)
        while True:
            status, self._row_count = _group_rows(
                paths,
                caps,
                weights,
                rekeyed,
                recounted,
                self._regroup_all,
                self.kept,
                self._toggled,
                self._row_of,
                self._counted,
                self._table,
                self._rows,
                self._row_weights,
                self._tally,
                self._row_count,
                self._members,
                self._carried,
                self._crossers,
                (MERGE_AT_MOST, STALE_ROWS_AT, ROWS_SLACK),
            )
            self._regroup_all = False
            if status == _BYPASS:
                self._bypass = BYPASS_CALLS
                return self._every_class(paths, capacities, caps, weights)
            if status == _NO_ROOM:  # start again with room for twice the live classes
                self._reset_rows(max(1024, 2 * int(np.count_nonzero(weights))), paths.shape[1])
                row_paths, row_caps = self._rows
                continue
            rekeyed, recounted = rekeyed[:0], recounted[:0]  # merged and counted
            rows = self._row_count
            members = self._members
            row_rates = fill_bottleneck_first(
                row_paths[:rows],
                self._padded,
                row_caps[:rows],
                self._row_weights[:rows],
                self._carried.copy(),
                members.start,
                members.length,
                members.member,
                self.kept.size,
            )
            loads, overloaded = _spread(
                paths, weights, self._row_of, row_rates, capacities, self.kept, self._toggled, rates
            )
            if not overloaded:
                break
        if self.computations % SHRINK_EVERY == 0:
            self._keep_loaded(loads, capacities)
        self.loads = loads
        return rates

    def _every_class(
        self, paths: np.ndarray, capacities: np.ndarray, caps: np.ndarray, weights: np.ndarray
    ) -> np.ndarray:
        """The rates without the relaxation: bottleneck first over every class (and the links' loads)."""
        rates = max_min_rates(paths, capacities, caps, weights)
        self.loads = link_loads(paths, weights, rates, capacities.size)
        return rates

    def _keep_loaded(self, loads: np.ndarray, capacities: np.ndarray) -> None:
        """Keep the links loaded to KEPT_LOAD of their capacity or more; drop the others."""
        with np.errstate(invalid="ignore"):  # unused links of infinite capacity
            kept = np.isfinite(capacities) & (loads >= KEPT_LOAD * capacities)
        self._toggled |= kept != self.kept
        self.kept = kept

    def _fit(self, paths: np.ndarray, links: int) -> None:
        """Room for this computation's classes and links (a flow table adds both as it grows)."""
        classes, hops = paths.shape
        if self.kept.size != links or self._rows[0].shape[1] != hops:
            kept = np.zeros(links, dtype=np.bool_)
            kept[: min(links, self.kept.size)] = self.kept[:links]
            self.kept = kept
            self._toggled = np.zeros(links, dtype=np.bool_)
            self._reset_rows(self._rows[1].size, hops)  # the padding link moved
        if self._row_of.size < classes:
            self._row_of = np.full(max(classes, 2 * self._row_of.size), -1, dtype=np.int64)
            self._counted = np.zeros(self._row_of.size)
            self._reset_rows(self._rows[1].size, hops)

    def _index_every_class(self, paths: np.ndarray, links: int) -> None:
        """List every class on the links it crosses, afresh."""
        classes, hops = paths.shape
        self._crossers = _no_lists(links, _room_for(classes * hops, links))
        _index(paths, np.arange(classes), self._crossers)

    def _reset_rows(self, capacity: int, hops: int) -> None:
        """No merged rows, no class merged: room for `capacity` rows."""
        self._table = np.full(1 << (2 * capacity - 1).bit_length(), -1, dtype=np.int64)
        self._rows = (np.empty((capacity, hops), dtype=LINK_INDEX), np.empty(capacity))
        self._row_weights = np.zeros(capacity)
        links = self.kept.size + 1
        self._members = _no_lists(links, _room_for(capacity * hops, links))  # capacity * hops rows at most
        self._carried = np.zeros(links)
        self._row_count = 0
        self._row_of[:] = -1
        self._counted[:] = 0.0
        self._tally[:] = 0
        self._regroup_all = True


class LinkLists(NamedTuple):
    """Per link, a list of what crosses it (the relaxation's rows, as `fairshare.fill_bottleneck_first` takes
    them, or flow classes): each link's list lies in `member`, from `start`, `length` long, with room for
    `room`. A full list moves to the end of the entries taken, with twice the room (`_add_member`), so a list
    of n has taken fewer than 4n entries (or MEMBERS_AT_FIRST)."""

    start: np.ndarray  # per link: where its list starts in `member`
    length: np.ndarray  # per link: the entries its list holds
    member: np.ndarray  # the lists, side by side
    room: np.ndarray  # per link: the entries its list has room for
    taken: np.ndarray  # one element: the entries of `member` taken by the lists


def _room_for(entries: int, links: int) -> int:
    """The entries lists of `entries` in all, over `links` lists, may take (`LinkLists`)."""
    return 4 * entries + MEMBERS_AT_FIRST * links


def _no_lists(links: int, entries: int) -> LinkLists:
    """Per link, an empty list; room for `entries` entries."""
    return LinkLists(
        start=np.zeros(links, dtype=np.int64),
        length=np.zeros(links, dtype=np.int64),
        member=np.empty(entries, dtype=np.int64),
        room=np.zeros(links, dtype=np.int64),
        taken=np.zeros(1, dtype=np.int64),
    )


# how grouping the classes into rows came out: grouped, or what the object has to do before it tries again
_GROUPED, _NO_ROOM, _BYPASS = 0, 1, 2


@numba.njit(cache=True)
def _group_rows(
    paths,
    caps,
    weights,
    rekeyed,
    recounted,
    regroup_all,
    kept,
    toggled,
    row_of,
    counted,
    table,
    rows,
    row_weights,
    tally,
    count,
    members,
    carried,
    crossers,
    thresholds,
):  # pragma: no cover (compiled)
    """Merge the classes that changed (`rekeyed`, all of them when `regroup_all`, those crossing `toggled`
    links) into rows, and count the flows of those and of the `recounted` ones into their rows (and into the
    `members` of the links those cross): one compiled call for what took four from Python. Returns the
    outcome (_GROUPED, or why not) and the rows there are.
    The solve over the rows is called from Python, not from here: numba's cache follows a compiled function's
    own file only, so a compiled call into fairshare.py would go on running its code as it was when this was
    cached (and a cache of mixed versions can crash). The `thresholds` (MERGE_AT_MOST, STALE_ROWS_AT,
    ROWS_SLACK) are an argument for the same reason: a module constant is frozen into the compiled code, where a
    test could not change it."""
    merge_at_most, stale_rows_at, slack = thresholds
    pad = kept.size  # the relaxation's padding link: one past the last
    while True:
        if regroup_all:
            dirty = _in_layout_order(paths, np.flatnonzero(weights > 0), kept)
        elif toggled.any():
            dirty = np.concatenate((rekeyed, _crossing(paths, toggled, crossers)))
        else:
            dirty = rekeyed
        _count(weights, dirty, True, row_of, counted, row_weights, tally, rows[0], pad, carried)  # out of their rows
        count = _merge(paths, caps, dirty, kept, pad, row_of, table, rows, count, members)
        if count < 0:
            return _NO_ROOM, 0
        regroup_all = False
        toggled[:] = False
        unmerged = np.concatenate(
            (
                _count(weights, dirty, False, row_of, counted, row_weights, tally, rows[0], pad, carried),
                _count(weights, recounted, False, row_of, counted, row_weights, tally, rows[0], pad, carried),
            )
        )
        if unmerged.size:  # live classes without a row (their flows came back without a rekey)
            rekeyed, recounted = unmerged, recounted[:0]
            continue
        used, live = tally[0], tally[1]
        if count > stale_rows_at * used + slack:  # mostly rows of classes gone
            count = _compact(weights, row_of, table, rows, row_weights, count, members, carried)
            if count < 0:
                return _NO_ROOM, 0
        if used > merge_at_most * live + slack:
            return _BYPASS, count
        return _GROUPED, count


@numba.njit(cache=True)
def _count(
    weights, classes, out, row_of, counted, row_weights, tally, row_paths, pad, carried
):  # pragma: no cover (compiled)
    """Bring the rows' flows up to date with these classes' (all out of their rows when `out`; a class past
    the `weights` has none): `row_weights`, `counted`, the `tally` (rows with flows, classes with flows) and
    the flows each link `carried`). Returns the classes with flows and no row, left uncounted."""
    unmerged = np.empty(classes.size, dtype=np.int64)
    found = 0
    for c in classes:
        if c >= counted.size:  # never counted: no row has its flows
            continue
        now = 0.0 if out or c >= weights.size else weights[c]
        before = counted[c]
        if now == before:
            continue
        row = row_of[c]
        if row < 0:  # uncounted (before is 0)
            unmerged[found] = c
            found += 1
            continue
        was, change = row_weights[row], now - before
        row_weights[row] = was + change
        for link in row_paths[row]:
            if link == pad:
                break
            carried[link] += change
        tally[0] += np.int64(row_weights[row] > 0) - np.int64(was > 0)
        tally[1] += np.int64(now > 0) - np.int64(before > 0)
        counted[c] = now
    return unmerged[:found]


@numba.njit(cache=True)
def _merge(paths, caps, dirty, kept, pad, row_of, table, rows, count, members):  # pragma: no cover (compiled)
    """Give each of the `dirty` classes the row of its (path over the kept links, cap), adding rows after
    the `count` there are as needed (each at the end of the `members` of the links it crosses); returns the
    rows there are then, or -1 if there is no room. A row's path holds its kept links first, in path order,
    and the padding link after them, where the solve stops (`fill_bottleneck_first`)."""
    row_paths, row_caps = rows
    hops = paths.shape[1]
    size = table.size
    key_path = np.empty(hops, dtype=row_paths.dtype)
    for f in dirty:
        key_path[:] = pad
        kept_hops = 0
        for link in paths[f]:
            if kept[link]:
                key_path[kept_hops] = link
                kept_hops += 1
        slot = _first_slot(key_path, size)
        while True:
            row = table[slot]
            if row < 0:
                if count == row_caps.size or 2 * (count + 1) > size:
                    return -1
                row = count
                count += 1
                table[slot] = row
                row_paths[row] = key_path
                row_caps[row] = caps[f]
                for link in key_path[:kept_hops]:
                    if not _add_member(members, link, row):
                        return -1
                break
            same = row_caps[row] == caps[f]
            for h in range(hops):
                same = same and row_paths[row, h] == key_path[h]
            if same:
                break
            slot = (slot + 1) & (size - 1)
        row_of[f] = row
    return count


@numba.njit(cache=True)
def _first_slot(key_path, size):  # pragma: no cover (compiled)
    """Where a row's key (its path over the kept links, padded) is first looked for in a hash table of `size`
    slots (a power of two; probed onwards from there)."""
    key = _FNV_OFFSET
    for link in key_path:
        key = (key ^ np.uint64(link)) * _FNV_PRIME
    return np.int64(key & np.uint64(size - 1))


@numba.njit(cache=True)
def _add_member(lists, link, item):  # pragma: no cover (compiled)
    """Put the item at the end of the link's list (`LinkLists`); False if there is no room for it."""
    start, length, member, room, taken = lists.start, lists.length, lists.member, lists.room, lists.taken
    held = length[link]
    if held == room[link]:
        grown = max(MEMBERS_AT_FIRST, 2 * held)
        if taken[0] + grown > member.size:
            return False
        member[taken[0] : taken[0] + held] = member[start[link] : start[link] + held]
        start[link], room[link] = taken[0], grown
        taken[0] += grown
    member[start[link] + held] = item
    length[link] = held + 1
    return True


@numba.njit(cache=True)
def _compact(weights, row_of, table, rows, row_weights, count, members, carried):  # pragma: no cover (compiled)
    """Drop the rows without flows and lay the others out as regrouping every class with flows would (by first
    kept link, then by lowest class with flows; `_in_layout_order`), over the `count` rows rather than the
    classes: the rows, the classes' rows (-1 where it was dropped), the hash table and the links' lists come out
    as that regrouping gives them. Returns the rows left, or -1 if the lists have no room."""
    row_paths, row_caps = rows
    pad = carried.size - 1
    seen = np.zeros(count, dtype=np.bool_)
    by_class = np.empty(count, dtype=np.int64)  # the rows with flows, by their lowest class with flows
    live = 0
    for c in range(weights.size):
        if weights[c] > 0 and not seen[row_of[c]]:
            seen[row_of[c]] = True
            by_class[live] = row_of[c]
            live += 1
    first_link = np.empty(live, dtype=np.int64)
    for i in range(live):
        first_link[i] = row_paths[by_class[i], 0]
    order = by_class[:live][np.argsort(first_link, kind="mergesort")]
    renamed = np.full(count, -1, dtype=np.int64)
    renamed[order] = np.arange(live)
    row_paths[:live] = row_paths[order]
    row_caps[:live] = row_caps[order]
    row_weights[:live] = row_weights[order]
    row_weights[live:count] = 0.0
    for c in range(row_of.size):
        if row_of[c] >= 0:
            row_of[c] = renamed[row_of[c]]
    table[:] = -1
    size = table.size
    carried[:] = 0.0
    members.length[:] = 0
    members.room[:] = 0
    members.taken[0] = 0
    for row in range(live):
        slot = _first_slot(row_paths[row], size)
        while table[slot] >= 0:
            slot = (slot + 1) & (size - 1)
        table[slot] = row
        for link in row_paths[row]:
            if link == pad:
                break
            if not _add_member(members, link, row):
                return -1
            carried[link] += row_weights[row]
    return live


@numba.njit(cache=True)
def _spread(paths, weights, row_of, row_rates, capacities, kept, toggled, rates):  # pragma: no cover (compiled)
    """Each class's rate, its row's (into `rates`); what every link then carries; whether a dropped link
    carries more than its capacity (each such link is kept, and marked toggled, for the next solve)."""
    loads = np.zeros(capacities.size)
    for f in range(weights.size):  # one pass: a class's rate, then what it puts on its links
        if weights[f] > 0:
            rate = rates[f] = row_rates[row_of[f]]
            carried = rate * weights[f]  # read once (see `fairshare._freeze`)
            for h in range(paths.shape[1]):
                loads[paths[f, h]] += carried
        else:
            rates[f] = 0.0
    overloaded = False
    for link in range(capacities.size):
        if not kept[link] and loads[link] > capacities[link] * (1 + RELATIVE_TOLERANCE):
            kept[link] = toggled[link] = True
            overloaded = True
    return loads, overloaded


@numba.njit(cache=True)
def _keep_unbound(paths, caps, weights, classes, capacities, kept, toggled):  # pragma: no cover (compiled)
    """Keep, before the solve, the dropped links that these classes would overload for certain: a class with
    flows that crosses no kept link gets its cap in the relaxation (infinite for most), more than each of its
    links of lower capacity can carry, and the computation would solve again to add them back. Speed only:
    the check after the solve stays, and the rates are exact either way. Measured (docs/reproductions.md,
    simulator speed): in the paper-scale Fair run, 4,700 of the 10,100 solves again."""
    for c in classes:
        if weights[c] <= 0:
            continue
        bound = False
        for link in paths[c]:
            bound = bound or kept[link]
        if not bound:
            for link in paths[c]:
                if capacities[link] < caps[c]:
                    kept[link] = toggled[link] = True


@numba.njit(cache=True)
def _in_layout_order(paths, classes, kept):  # pragma: no cover (compiled)
    """The classes in the order their rows are best laid out in: by their first kept link (a class crossing none
    last). A solve freezes the rows of one bottleneck together, and a row's first kept link is mostly its host's or
    its rack's link out, where most rows freeze (77 % of the flows in a 10x-scale Fair run with 1000 jobs), so those
    rows then lie side by side in memory: a solve over 10,000 rows at 10x scale waits mostly for rows scattered
    over a megabyte."""
    first = np.empty(classes.size, dtype=np.int64)
    for i in range(classes.size):
        first[i] = kept.size
        for link in paths[classes[i]]:
            if kept[link]:
                first[i] = link
                break
    return classes[np.argsort(first, kind="mergesort")]


@numba.njit(cache=True)
def _index(paths, classes, crossers):  # pragma: no cover (compiled)
    """List these classes on the links they cross (`crossers`); False if the lists have no room."""
    for c in classes:
        for link in paths[c]:
            if not _add_member(crossers, link, c):
                return False
    return True


@numba.njit(cache=True)
def _crossing(paths, links, crossers):  # pragma: no cover (compiled)
    """The classes, in ascending order, that cross any of the marked links (those without flows too: flows may
    come back to them), read from the links' lists of `crossers`; entries of classes that no longer cross the
    link (rekeyed since onto another path, or past the classes in use) are dropped from its list."""
    classes, hops = paths.shape
    start, length, member = crossers.start, crossers.length, crossers.member
    marked = np.flatnonzero(links)
    listed = 0
    for link in marked:
        listed += length[link]
    found = np.empty(listed, dtype=np.int64)
    seen = np.zeros(classes, dtype=np.bool_)
    n = 0
    for link in marked:
        kept = 0
        for i in range(start[link], start[link] + length[link]):
            c = member[i]
            crosses = False
            if c < classes:
                for h in range(hops):
                    crosses = crosses or paths[c, h] == link
            if crosses:
                member[start[link] + kept] = c
                kept += 1
                if not seen[c]:
                    seen[c] = True
                    found[n] = c
                    n += 1
        length[link] = kept
    return np.sort(found[:n])
