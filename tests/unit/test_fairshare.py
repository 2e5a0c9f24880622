"""Max-min fair rates on hand-checked cases and against a plain progressive filling on random ones (every
solver), the relaxed solver against the reference over sequences of computations that keep, drop and add
back links, and the simulator's flow table against the reference after random arrivals, departures and
circuit changes (hypothesis)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridbed.config.fabric import FabricSpec
from hybridbed.controller.circuits import Circuit
from hybridbed.scheduler.model import JobSpec, Resources, Task, build_job
from hybridbed.simulator import relaxed_rates
from hybridbed.simulator.fabric import FabricLinks
from hybridbed.simulator.fairshare import RateSolver, link_loads, max_min_rates, progressive_filling_rates
from hybridbed.simulator.flows import Flow, FlowTable
from hybridbed.simulator.relaxed_rates import RelaxedMaxMin

INF = np.inf


@pytest.fixture(params=["bottleneck-first", "reference", "relaxed"])
def solver(request: pytest.FixtureRequest) -> RateSolver:
    if request.param == "relaxed":
        return RelaxedMaxMin()  # a fresh one: it keeps state between computations
    return max_min_rates if request.param == "bottleneck-first" else progressive_filling_rates


def rates(
    paths: list[list[int]], capacities: list[float], caps: list[float] | None = None, solver: RateSolver = max_min_rates
) -> list[float]:
    none = len(capacities)
    width = max(len(p) for p in paths)
    padded = np.array([p + [none] * (width - len(p)) for p in paths])
    caps_array = np.array(caps if caps is not None else [INF] * len(paths), dtype=float)
    return solver(padded, np.array(capacities + [INF]), caps_array, None).tolist()


def test_flows_on_one_link_split_it_evenly(solver):
    assert rates([[0], [0], [0], [0]], [12.0], solver=solver) == pytest.approx([3, 3, 3, 3])


def test_a_flow_held_back_elsewhere_leaves_its_share_to_the_others(solver):
    # link 0 (10) carries a, b, c; link 1 (2) also carries a: a gets 2, b and c split the other 8
    assert rates([[0, 1], [0], [0]], [10.0, 2.0], solver=solver) == pytest.approx([2, 4, 4])


def test_the_classic_parking_lot(solver):
    # links 0 and 1 of capacity 1; the long flow crosses both, one short flow on each: all get 1/2
    assert rates([[0, 1], [0], [1]], [1.0, 1.0], solver=solver) == pytest.approx([0.5, 0.5, 0.5])


def test_two_bottleneck_levels_at_once(solver):
    # link 0 (3) has three flows, link 1 (8) two others and one of the first three:
    # link 0 gives 1 each, so the shared flow takes 1 and link 1's others split the remaining 7
    assert rates([[0], [0], [0, 1], [1], [1]], [3.0, 8.0], solver=solver) == pytest.approx([1, 1, 1, 3.5, 3.5])


def test_caps_bind_before_links_and_free_the_rest(solver):
    assert rates([[0], [0], [0]], [9.0], caps=[1.0, INF, INF], solver=solver) == pytest.approx([1, 4, 4])
    assert rates([[0], [0]], [9.0], caps=[10.0, 10.0], solver=solver) == pytest.approx([4.5, 4.5])


def test_a_flow_with_nothing_to_limit_it_is_infinite_and_an_empty_set_is_fine(solver):
    assert rates([[], [0]], [5.0], solver=solver) == [INF, 5.0]
    assert solver(np.zeros((0, 4), dtype=int), np.array([1.0, INF]), np.zeros(0), None).size == 0


def progressive_filling(paths: list[list[int]], capacities: list[float], caps: list[float]) -> list[float]:
    """The textbook algorithm, one level at a time, in plain Python."""
    rate = [0.0] * len(paths)
    frozen = [False] * len(paths)
    while not all(frozen):
        live = [f for f in range(len(paths)) if not frozen[f]]
        headroom = []
        for link, capacity in enumerate(capacities):
            on = [f for f in live if link in paths[f]]
            if on:
                used = sum(rate[f] for f in range(len(paths)) if link in paths[f])
                headroom.append(((capacity - used) / len(on), link))
        step = min([h for h, _ in headroom] + [caps[f] - rate[f] for f in live])
        for f in live:
            rate[f] += step
        full = {link for h, link in headroom if h - step <= 1e-9}
        for f in live:
            if caps[f] - rate[f] <= 1e-9 or full & set(paths[f]):
                frozen[f] = True
    return rate


@pytest.mark.parametrize("seed", range(20))
def test_matches_plain_progressive_filling(seed, solver):
    rng = np.random.default_rng(seed)
    n_links, n_flows = int(rng.integers(2, 8)), int(rng.integers(1, 25))
    capacities = rng.uniform(1, 10, n_links).round(1).tolist()
    paths = [
        sorted(rng.choice(n_links, size=int(rng.integers(1, min(4, n_links) + 1)), replace=False).tolist())
        for _ in range(n_flows)
    ]
    caps = [float(rng.uniform(0.2, 5)) if rng.random() < 0.3 else INF for _ in range(n_flows)]
    expected = progressive_filling(paths, capacities, [c if c != INF else 1e18 for c in caps])
    assert rates(paths, capacities, caps, solver=solver) == pytest.approx(expected, rel=1e-6)


def test_a_weighted_row_counts_as_that_many_identical_flows(solver):
    paths = np.array([[0, 2], [1, 2]])
    capacities = np.array([12.0, 12.0, np.inf])
    weighted = solver(paths, capacities, np.full(2, np.inf), np.array([3, 1]))
    expanded = solver(np.array([[0, 2]] * 3 + [[1, 2]]), capacities, np.full(4, np.inf), None)
    assert weighted.tolist() == pytest.approx([expanded[0], expanded[3]])
    assert weighted.tolist() == pytest.approx([4, 12])


def test_the_relaxed_solver_adds_back_a_dropped_link_that_the_relaxation_overloads():
    solver = RelaxedMaxMin()
    capacities = np.array([4.0, 100.0, 3.0, INF])
    # link 0 binds (four flows at 1 each); link 2 carries one of them and is loaded 1/3: dropped
    paths = np.array([[0, 3], [0, 3], [0, 3], [0, 2]])
    solver(paths, capacities, np.full(4, INF), np.ones(4))
    for _ in range(relaxed_rates.SHRINK_EVERY):
        solver(paths, capacities, np.full(4, INF), np.ones(4), np.zeros(0, dtype=np.int64))
    assert solver.kept.tolist() == [True, False, False, False]
    # three more flows over link 2 (and link 1, dropped too): without the two links they would be unbounded
    more = np.vstack([paths, [[1, 2]] * 3])
    weights = np.ones(7)
    got = solver(more, capacities, np.full(7, INF), weights, np.arange(4, 7))
    assert got.tolist() == pytest.approx(progressive_filling_rates(more, capacities, np.full(7, INF), weights))
    assert got.tolist() == pytest.approx([3.25 / 3] * 3 + [0.75] * 4)  # link 2 binds first now
    assert solver.kept[2]


def test_rebuilt_rows_lie_in_the_order_of_their_first_kept_link():
    solver = RelaxedMaxMin()
    capacities = np.array([1.0, 1.0, 1.0, INF])  # link 3: the padding
    # the classes' first links: 2, 1, 0, 1 (two classes share link 1, one of them crosses link 2 after it)
    paths = np.array([[2, 3], [1, 2], [0, 3], [1, 3]])
    weights, caps = np.ones(4), np.full(4, INF)
    solver(paths, capacities, caps, weights)
    assert solver.kept[:3].all()  # each link binds
    got = solver(paths, capacities, caps, weights, None)  # not told what changed: the rows are rebuilt
    assert got.tolist() == pytest.approx(progressive_filling_rates(paths, capacities, caps, weights))
    # rows by first kept link (0, 1, 1, 2), classes with the same first link in class order
    assert solver._row_of[:4].tolist() == [3, 1, 0, 2]


def test_rows_of_classes_gone_are_dropped_and_the_rest_laid_out_as_rebuilt_rows(monkeypatch):
    monkeypatch.setattr(relaxed_rates, "STALE_ROWS_AT", 1.0)  # any row without flows has the rows compacted
    monkeypatch.setattr(relaxed_rates, "ROWS_SLACK", 0)
    monkeypatch.setattr(relaxed_rates, "MERGE_AT_MOST", 1.0)  # and the relaxation never steps aside
    capacities = np.array([1.0, 1.0, 1.0, 1.0, INF])  # link 4: the padding
    paths = np.array([[2, 4], [1, 2], [0, 4], [1, 4], [3, 4], [0, 3]])
    caps = np.full(6, INF)
    solver = RelaxedMaxMin()
    solver(paths, capacities, caps, np.array([1.0, 1, 1, 1, 1, 0]))
    assert solver._row_count == 5
    # classes 1 and 2 lose their flows, class 5 comes: its row is added after the five
    weights = np.array([1.0, 0, 0, 1, 1, 1])
    got = solver(paths, capacities, caps, weights, np.array([5]), np.array([1, 2, 5]))
    live = [0, 3, 4, 5]
    assert got[live].tolist() == pytest.approx(progressive_filling_rates(paths, capacities, caps, weights)[live])
    assert solver.kept[:4].all()
    # four rows, by first kept link: class 5's (link 0), then those of classes 3, 0 and 4
    assert solver._row_count == 4
    assert solver._row_of[live].tolist() == [2, 1, 3, 0]
    rebuilt = RelaxedMaxMin()
    rebuilt(paths, capacities, caps, weights)
    assert solver._row_of[live].tolist() == rebuilt._row_of[live].tolist()
    rows = solver._row_count
    for kept, fresh in zip(solver._rows, rebuilt._rows, strict=True):
        assert kept[:rows].tolist() == fresh[:rows].tolist()
    assert solver._row_weights[:rows].tolist() == rebuilt._row_weights[:rows].tolist()
    assert_link_members_kept_up_to_date(solver)


def count_solves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the relaxed solver's solves over its rows (one element, incremented at each)."""
    solves = [0]
    solve = relaxed_rates.fill_bottleneck_first

    def counted(*args):
        solves[0] += 1
        return solve(*args)

    monkeypatch.setattr(relaxed_rates, "fill_bottleneck_first", counted)
    return solves


def relaxed_with_link_0_kept(capacities: np.ndarray, paths: np.ndarray) -> RelaxedMaxMin:
    """A relaxed solver that has computed `paths` often enough to drop every link but link 0."""
    solver = RelaxedMaxMin()
    for _ in range(relaxed_rates.SHRINK_EVERY + 1):
        solver(paths, capacities, np.full(len(paths), INF), np.ones(len(paths)), np.zeros(0, dtype=np.int64))
    assert solver.kept.tolist() == [True, False, False, False]
    return solver


def test_a_new_class_no_kept_link_holds_back_gets_its_links_before_the_solve(monkeypatch):
    capacities = np.array([4.0, 100.0, 3.0, INF])
    paths = np.array([[0, 3], [0, 3], [0, 3], [0, 2]])
    solver = relaxed_with_link_0_kept(capacities, paths)
    solves = count_solves(monkeypatch)
    more = np.vstack([paths, [[1, 2]] * 3])  # over dropped links 1 and 2 only, without a cap: unbounded
    got = solver(more, capacities, np.full(7, INF), np.ones(7), np.arange(4, 7))
    assert got.tolist() == pytest.approx([3.25 / 3] * 3 + [0.75] * 4)
    assert solves == [1]  # links 1 and 2 were kept before the solve, not after an overload
    assert solver.kept.tolist() == [True, True, True, False]


def test_a_new_class_a_kept_link_holds_back_still_overloads_a_dropped_link_and_solves_again(monkeypatch):
    capacities = np.array([4.0, 100.0, 3.0, INF])
    paths = np.array([[0, 3], [0, 3], [0, 3], [0, 2]])
    solver = relaxed_with_link_0_kept(capacities, paths)
    solves = count_solves(monkeypatch)
    # nine more over link 0 (kept: 4/13 each) and link 2, which would carry 10 * 4/13 > 3 at those rates
    more = np.vstack([paths, [[0, 2]] * 9])
    weights = np.ones(13)
    got = solver(more, capacities, np.full(13, INF), weights, np.arange(4, 13))
    assert got.tolist() == pytest.approx(progressive_filling_rates(more, capacities, np.full(13, INF), weights))
    assert got.tolist() == pytest.approx([1 / 3] * 3 + [0.3] * 10)  # link 2 binds first
    assert solves == [2]
    assert solver.kept.tolist() == [True, False, True, False]


# a sequence of computations on one evolving problem: a class changes path or cap (it is rekeyed), its flow
# count changes (0: no flows; it is recounted) or a link's capacity changes
LINKS, HOPS = 6, 3
CLASS_PATH = st.lists(st.integers(0, LINKS), min_size=HOPS, max_size=HOPS)  # LINKS: the padding link
REKEY = st.tuples(st.just("rekey"), st.integers(0, 19), CLASS_PATH, st.sampled_from([INF, INF, 0.5, 2.0]))
COUNT = st.tuples(st.just("count"), st.integers(0, 19), st.integers(0, 3))
CAPACITY = st.tuples(st.just("capacity"), st.integers(0, LINKS - 1), st.sampled_from([1.0, 3.0, 10.0]))


@pytest.mark.parametrize("mode", ["as-configured", "drop-and-bypass-often", "compact-often"])
@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.one_of(REKEY, COUNT, CAPACITY), max_size=6), min_size=1, max_size=25))
def test_the_relaxed_solver_matches_the_reference_over_any_sequence_of_computations(mode, computations):
    paths = np.full((20, HOPS), LINKS, dtype=np.int64)
    caps, weights = np.full(20, INF), np.zeros(20)
    capacities = np.array([2.0, 4.0, 6.0, 8.0, 10.0, 12.0, INF])
    solver = RelaxedMaxMin()
    stepped_aside, had_flows = False, False
    often = mode == "drop-and-bypass-often"
    with pytest.MonkeyPatch.context() as patch:
        if often:  # every other computation drops the links below the kept load or skips the relaxation, and
            # some do not say which classes were rekeyed
            patch.setattr(relaxed_rates, "SHRINK_EVERY", 2)
            patch.setattr(relaxed_rates, "MERGE_AT_MOST", -100.0)
            patch.setattr(relaxed_rates, "BYPASS_CALLS", 1)
        if mode == "compact-often":  # any row without flows has the rows compacted
            patch.setattr(relaxed_rates, "STALE_ROWS_AT", 1.0)
            patch.setattr(relaxed_rates, "ROWS_SLACK", 0)
            patch.setattr(relaxed_rates, "MERGE_AT_MOST", 1.0)  # and the relaxation never steps aside
        for changes in computations:
            rekeyed, recounted = [], []
            for change in changes:
                if change[0] == "rekey":
                    _, cls, path, cap = change
                    paths[cls], caps[cls] = path, cap
                    rekeyed.append(cls)
                elif change[0] == "count":
                    weights[change[1]] = change[2]
                    recounted.append(change[1])
                else:
                    capacities[change[1]] = change[2]
            # None: not known
            told_rekeyed = None if often and len(changes) % 3 == 0 else np.array(rekeyed, dtype=np.int64)
            told_recounted = None if often and len(changes) % 3 == 1 else np.array(recounted, dtype=np.int64)
            got = solver(paths, capacities, caps, weights, told_rekeyed, told_recounted)
            stepped_aside |= solver._bypass > 0
            had_flows |= bool(weights.any())
            expected = progressive_filling_rates(paths, capacities, caps, weights)
            live = weights > 0
            assert got[live] == pytest.approx(expected[live], rel=1e-9)
            # what the flow table's core counters read: every finite link's load at those rates
            finite = np.isfinite(capacities)
            loads = link_loads(paths, weights, expected, capacities.size)
            assert solver.loads[finite] == pytest.approx(loads[finite], rel=1e-9, abs=1e-9)
            assert_link_members_kept_up_to_date(solver)
            assert_classes_listed_on_their_links(solver, paths)
    assert stepped_aside == (often and had_flows)  # the every-class path ran where, and only where, it was asked to


def assert_link_members_kept_up_to_date(solver: RelaxedMaxMin) -> None:
    """The relaxed solver's per-link rows and flows, kept up to date as rows come and are recounted, are what
    listing the rows afresh gives: each link's flows exactly, and its rows with flows, in ascending order."""
    rows = solver._row_count
    row_paths, weights = solver._rows[0][:rows], solver._row_weights[:rows]
    members, carried = solver._members, solver._carried
    pad = carried.size - 1
    for link in range(pad):
        crossing = [row for row in range(rows) for hop in row_paths[row] if hop == link]
        assert carried[link] == sum(weights[row] for row in crossing)
        listed = members.member[members.start[link] : members.start[link] + members.length[link]].tolist()
        assert [row for row in listed if weights[row] > 0] == [row for row in crossing if weights[row] > 0]


def assert_classes_listed_on_their_links(solver: RelaxedMaxMin, paths: np.ndarray) -> None:
    """Every class is on the list of every link it crosses (the lists may also hold classes gone elsewhere)."""
    crossers = solver._crossers
    for c, path in enumerate(paths.tolist()):
        for link in path:
            start = crossers.start[link]
            assert c in crossers.member[start : start + crossers.length[link]].tolist()


# a flow table's life: start a flow (source host, destination host, cap in Mb/s or none, whether it shares
# its task's link), end the flow in a given place, light or drop the circuit between racks 0 and 1
HOSTS = ["r0h0", "r0h1", "r1h0", "r1h1", "r2h0", "r2h1"]
START = st.tuples(
    st.just("start"),
    st.sampled_from(HOSTS),
    st.sampled_from(HOSTS),
    st.sampled_from([None, 3.0, 40.0]),
    st.booleans(),
)
END = st.tuples(st.just("end"), st.integers(0, 63))
CIRCUIT = st.tuples(st.just("circuit"), st.booleans())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(START, START, END, CIRCUIT), min_size=1, max_size=60))
def test_the_simulators_rates_match_the_reference_after_any_sequence_of_changes(steps):
    fabric = FabricSpec(racks=3, hosts_per_rack=2, host_rate_mbps=100, eps_rate_mbps=30, ocs_rate_mbps=200)
    host_racks = {h: int(h[1]) for h in HOSTS}
    tables = [
        FlowTable(FabricLinks(fabric, host_racks), solver)
        for solver in (None, progressive_filling_rates, max_min_rates)
    ]
    task_links = [table.open_task_link(25 * 1e6 / 8) for table in tables]
    circuit, lit = Circuit(0, 1), False
    started: list[Task] = []  # a task per flow, so that a flow can end on its own
    for step in steps:
        if step[0] == "start":
            _, src, dst, cap_mbps, shared = step
            task = replace(
                build_job(JobSpec("j", 0, 1, 0, 0, 1, 0, 1, 1), Resources()).maps[0], task_id=f"t{len(started)}"
            )
            started.append(task)
            for table, task_link in zip(tables, task_links):
                flow = Flow("shuffle", task, 0, None, src, dst, 10**9, 0.0)
                steered = circuit if lit and (host_racks[src], host_racks[dst]) == (0, 1) else None
                table.add(flow, cap_mbps * 1e6 / 8 if cap_mbps else INF, steered, None, task_link if shared else None)
        elif step[0] == "end" and started:
            task = started.pop(step[1] % len(started))
            for table in tables:
                table.take_out(task)
        elif step[0] == "circuit":
            lit = step[1]
            for table in tables:
                table.reroute(0, 1, circuit if lit else None)
        for table in tables:
            table.settle()
        n = len(tables[0])
        assert n == len(tables[1]) == len(tables[2]) == len(started)
        assert tables[0].rate[:n] == pytest.approx(tables[1].rate[:n], rel=1e-9)
        assert tables[2].rate[:n] == pytest.approx(tables[1].rate[:n], rel=1e-9)
        for table in tables:  # the next finish, kept from the rate computation's pass, is the one at these rates
            with np.errstate(divide="ignore", invalid="ignore"):
                left = table.remaining[:n] / table.rate[:n]
            assert table.time_to_next_finish() == (0.0 if (~(left >= 0)).any() else left.min(initial=INF))


def test_a_new_flow_class_takes_the_lowest_free_row_and_computations_stop_at_the_highest_in_use():
    fabric = FabricSpec(racks=3, hosts_per_rack=2, host_rate_mbps=100, eps_rate_mbps=30, ocs_rate_mbps=200)
    host_racks = {h: int(h[1]) for h in HOSTS}
    classes_solved: list[int] = []

    def recording(paths, capacities, caps, weights=None):
        classes_solved.append(paths.shape[0])
        return progressive_filling_rates(paths, capacities, caps, weights)

    table = FlowTable(FabricLinks(fabric, host_racks), recording)
    tasks = [
        replace(build_job(JobSpec("j", 0, 1, 0, 0, 1, 0, 1, 1), Resources()).maps[0], task_id=f"t{i}") for i in range(4)
    ]
    for task, (src, dst) in zip(tasks, [("r0h0", "r1h0"), ("r0h1", "r2h0"), ("r1h1", "r2h1")]):
        table.add(Flow("shuffle", task, 0, None, src, dst, 10**9, 0.0), INF, None)
    table.settle()
    assert table.cls[:3].tolist() == [0, 1, 2] and classes_solved[-1] == 3
    table.take_out(tasks[0])  # frees the lowest class
    table.take_out(tasks[2])  # frees the highest: the computation passes over the two below it only
    table.settle()
    assert classes_solved[-1] == 2
    table.add(Flow("shuffle", tasks[3], 0, None, "r2h0", "r0h0", 10**9, 0.0), INF, None)
    table.settle()
    assert sorted(table.cls[:2].tolist()) == [0, 1] and classes_solved[-1] == 2
    assert table.rate[:2].tolist() == pytest.approx([30e6 / 8] * 2)  # each alone on a 30 Mb/s EPS uplink
