"""Hadoop's shuffle connections (workers/shuffle.py), the shared rate of a reducer's connections, and both
backends making one connection per map host."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridbed.config.constants import SHUFFLE_READ_TIMEOUT_S
from hybridbed.config.fabric import FabricSpec
from hybridbed.config.scenario import Scenario
from hybridbed.experiments.simulated import result_logs
from hybridbed.scheduler.model import JobSpec, Resources, build_job
from hybridbed.simulator.engine import ReduceFetches, ResultLogs, Simulation
from hybridbed.simulator.fabric import FabricLinks
from hybridbed.simulator.flows import FINISH_FRACTION, Flow, FlowTable
from hybridbed.workers.pacing import Pacer, Rate
from hybridbed.workers.shuffle import (
    MAX_OUTPUTS_PER_CONNECTION,
    Connection,
    GroupTally,
    ShuffleFetches,
    fetch_order,
    penalty_s,
)

from .test_simulator import simulate


def announced(outputs: dict[str, int]) -> ShuffleFetches:
    """A reducer told of `count` outputs on each host."""
    plan = ShuffleFetches()
    for host, count in outputs.items():
        for i in range(count):
            plan.announce(f"{host}-m{i}", host)
    return plan


def test_one_connection_per_host_copies_up_to_twenty_outputs_and_five_are_open_at_most():
    counts = {"h0": 45, "h1": 3, "h2": 1, "h3": 1, "h4": 1, "h5": 1}
    plan = announced(counts)
    first = plan.open()
    assert len(first) == 5 and len({c.host for c in first}) == 5  # five at once, one per host
    assert all(len(c.sources) == min(counts[c.host], MAX_OUTPUTS_PER_CONNECTION) for c in first)
    assert plan.open() == []  # all five busy
    copied: dict[str, list[int]] = {}
    while plan.in_flight:
        for connection in list(plan.in_flight.values()):
            copied.setdefault(connection.host, []).append(len(connection.sources))
            plan.done(connection)
        plan.open()
    assert copied == {"h0": [20, 20, 5], **{host: [counts[host]] for host in counts if host != "h0"}}
    assert len(plan.fetched) == 52 and plan.open() == []


def test_each_free_fetcher_draws_a_waiting_host_at_random_so_reducers_spread_over_map_hosts():
    """Hadoop's ShuffleSchedulerImpl.getHost: of ten hosts announced in one order, each comes first about as
    often (taken in announcement order, h0 always would), also when the hosts' groups differ in size."""
    firsts = Counter()
    for seed in range(2000):
        plan = ShuffleFetches(parallel=1, rng=random.Random(seed))
        for i in range(10):
            plan.announce(f"m{i}", f"h{i}")
        firsts[plan.open()[0].host] += 1
    assert set(firsts) == {f"h{i}" for i in range(10)} and all(140 <= n <= 260 for n in firsts.values())
    group = {"h0": "r0", **{f"h{i}": "r1" for i in range(1, 10)}}  # one host against nine
    firsts.clear()
    for seed in range(2000):
        plan = ShuffleFetches(parallel=1, tally=GroupTally(group.__getitem__, lambda _: 1), rng=random.Random(seed))
        for host in group:
            plan.announce(f"{host}-m0", host)
        firsts[plan.open_passing_over(())[0][0].host] += 1
    assert all(140 <= n <= 260 for n in firsts.values()) and len(firsts) == 10  # h0 a tenth, not a half


@pytest.mark.parametrize("parallel", [1, 3])
@pytest.mark.parametrize("grouped", [True, False])
def test_free_fetchers_draw_the_hosts_random_sample_would_over_the_free_pools_end_to_end(parallel, grouped):
    """One fetcher takes one index as `random.sample` takes it from the same generator, and several take
    `sample`'s indices, in one pool (no tally) or over several: runs keep the draws (and result files) they had
    when every draw went through `sample` over the hosts."""
    group = {f"h{i}": f"r{i % 3}" for i in range(9)}
    tally = GroupTally(group.__getitem__, lambda _: 1) if grouped else None
    for seed in range(200):
        plan = ShuffleFetches(parallel=parallel, tally=tally, rng=random.Random(seed))
        for host in group:
            plan.announce(f"{host}-m0", host)
        free_end_to_end = [host for pool in plan._free.values() for host in pool.hosts]
        assert len(plan._free) == (3 if grouped else 1)
        assert [c.host for c in plan.open()] == random.Random(seed).sample(free_end_to_end, parallel)


def test_a_reducer_attempts_draws_follow_from_the_runs_seed():
    def hosts_in_order(rng: random.Random) -> list[str]:
        plan = ShuffleFetches(parallel=1, rng=rng)
        for i in range(10):
            plan.announce(f"m{i}", f"h{i}")
        order = []
        while len(plan.fetched) < 10:
            (connection,) = plan.open()
            order.append(connection.host)
            plan.done(connection)
        return order

    assert hosts_in_order(fetch_order(1, "j0-r0", 0)) == hosts_in_order(fetch_order(1, "j0-r0", 0))
    others = [hosts_in_order(fetch_order(seed, "j0-r0", attempt)) for seed in (1, 2) for attempt in (0, 1)]
    assert len({tuple(order) for order in others}) == 4  # another seed or attempt, another order


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_failed_connection_waits_for_its_hosts_penalty_and_goes_to_where_an_output_ran_again():
    clock = Clock()
    plan = announced({"h0": 2})
    plan.clock = clock
    (connection,) = plan.open()
    plan.announce("h0-m1", "h9")  # its map ran again on h9 while the connection was open
    assert plan.failed(connection) == penalty_s(1) == 13.0  # Hadoop's 10 s x 1.3 after a first failure
    assert plan.open() == [Connection("h9", ("h0-m1",))]  # h0 is penalized
    clock.now = 12.9
    assert plan.open() == []
    clock.now = 13.0
    assert plan.open() == [Connection("h0", ("h0-m0",))]
    plan.announce("h0-m0", "h7")  # an output on an open connection: fetched where it is, if that works
    for c in list(plan.in_flight.values()):
        plan.done(c)
    plan.announce("h0-m0", "h8")  # fetched already: nothing to do
    assert plan.fetched == {"h0-m0", "h0-m1"} and plan.open() == []
    moved = announced({"h0": 1, "h1": 1})
    moved.announce("h0-m0", "h1")  # h0's only output ran again on h1: nothing is left on h0 to copy
    assert moved.open() == [Connection("h1", ("h1-m0", "h0-m0"))]
    partly = announced({"h0": 3})
    partly.clock = clock
    (connection,) = partly.open()
    partly.failed(connection, copied=1)  # it broke copying its second output: the first is kept
    clock.now += penalty_s(1)
    assert partly.fetched == {"h0-m0"} and partly.open() == [Connection("h0", ("h0-m1", "h0-m2"))]
    assert partly.failures == {"h0-m1": 1}  # the output it was copying failed, not those behind it


def test_a_hosts_penalty_grows_with_its_outputs_failures_to_hadoops_cap_and_a_success_clears_them():
    clock = Clock()
    plan = ShuffleFetches(clock=clock)
    plan.announce("m0", "h0")
    penalties = []
    for _ in range(8):
        (connection,) = plan.open()
        penalties.append(plan.failed(connection) - clock.now)
        assert plan.open() == []  # penalized: no fetcher takes the host
        clock.now += penalties[-1]
    assert penalties == pytest.approx([10 * 1.3**n for n in range(1, 7)] + [60.0, 60.0])
    plan.announce("m1", "h0")
    (connection,) = plan.open()
    assert connection.sources == ("m0", "m1")
    plan.failed(connection, copied=1)  # m0 is copied at last; m1 fails a first time
    assert plan.failures == {"m1": 1}
    clock.now += 13.0
    (connection,) = plan.open()
    plan.done(connection)
    assert plan.failures == {} and plan.fetched == {"m0", "m1"}


def test_a_reducer_waiting_for_circuits_passes_over_a_penalized_host_until_its_penalty_is_over():
    clock = Clock()
    group = {"h0": 0, "h1": 0, "h2": 1}
    plan = ShuffleFetches(parallel=1, tally=GroupTally(group.__getitem__, lambda output: 1), clock=clock)
    for host in group:
        plan.announce(f"{host}-m0", host)
    (connection,), passed = plan.open_passing_over({1})
    assert connection.host in ("h0", "h1") and passed == [1]  # h2 is behind a dark pair: the reducer waits for it
    first, other = connection.host, {"h0": "h1", "h1": "h0"}[connection.host]
    plan.failed(connection)
    assert plan.open_passing_over({1}) == ([Connection(other, (f"{other}-m0",))], [1])  # `first` is penalized
    plan.done(plan.in_flight[other])
    assert plan.open_passing_over({1}) == ([], [1])  # `first` penalized, h2 behind a dark pair
    clock.now = penalty_s(1)
    assert plan.open_passing_over({1}) == ([Connection(first, (f"{first}-m0",))], [1])
    plan.done(plan.in_flight[first])
    (connection,), _ = plan.open_passing_over(())  # the pair lit: h2's output is copied, and its connection breaks
    plan.failed(connection)
    assert plan.open_passing_over({1}) == ([], [])  # dark again, and its one host penalized: nothing waits on it


def test_the_bytes_waiting_per_group_follow_every_announcement_connection_and_failure():
    sizes = {f"h{h}-m{i}": 100 * h + i + 1 for h in range(4) for i in range(30)}
    group = {"h0": "r0", "h1": "r0", "h2": "r1", "h3": "r1", "h9": "r2"}
    clock = Clock()
    plan = ShuffleFetches(tally=GroupTally(group.__getitem__, sizes.__getitem__), clock=clock)

    def recounted() -> dict[str, int]:
        """The outputs neither fetched nor on a connection, by the group of the host each is on now."""
        on_connections = {s for c in plan.in_flight.values() for s in c.sources}
        totals = dict.fromkeys(group.values(), 0)
        for source, host in plan.location.items():
            if source not in plan.fetched and source not in on_connections:
                totals[group[host]] += sizes[source]
        return totals

    def same() -> bool:
        return {g: plan.waiting_by_group.get(g, 0) for g in set(group.values())} == recounted()

    for source in sizes:
        plan.announce(source, source.split("-")[0])
    plan.announce("h0-m0", "h0")  # told twice: counted once
    assert same() and plan.waiting_by_group["r0"] == sum(v for k, v in sizes.items() if k < "h2")
    opened = plan.open()
    assert same()
    plan.announce("h3-m29", "h9")  # an output waiting on h3 ran again on h9
    plan.announce("h0-m1", "h9")  # one on an open connection: it stays there
    plan.failed(opened[0])
    plan.done(opened[1])
    assert same()
    clock.now += penalty_s(1)
    for _ in range(len(sizes)):
        for connection in list(plan.in_flight.values()):
            plan.done(connection)
        opened = plan.open()
        assert same() and all(c.sources for c in opened)  # never a connection with nothing to copy
    assert plan.fetched == set(sizes)
    assert set(plan.waiting_by_group.values()) == {0}


HOSTS = [f"h{i}" for i in range(12)]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("announce"), st.integers(0, 40), st.sampled_from(HOSTS)),
        st.tuples(st.just("open"), st.sets(st.integers(0, 3), max_size=4)),
        st.tuples(st.just("done"), st.integers(0, 10)),
        st.tuples(st.just("failed"), st.integers(0, 10)),
        st.tuples(st.just("wait"), st.floats(0, 30)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(steps=STEPS, parallel=st.integers(1, 3), per_connection=st.integers(1, 3), seed=st.integers(0, 3))
def test_passing_over_dark_groups_opens_what_a_fetcher_may_draw_and_notes_the_groups_it_waits_for(
    steps, parallel, per_connection, seed
):
    """After announcements, connections done and failed and hosts penalized, in any order: every opening
    fills the free fetchers from the hosts a fetcher may draw (outputs waiting, no connection, no penalty,
    not behind a dark pair), one connection per host with its first outputs, and notes exactly the dark
    groups that hold such a host; the bytes waiting per group stay those of the outputs left to copy."""
    group_of = {host: int(host[1:]) % 4 for host in HOSTS}
    clock = Clock()
    plan = ShuffleFetches(
        parallel, per_connection, tally=GroupTally(group_of.__getitem__, lambda output: 1), clock=clock
    )
    plan.rng = random.Random(seed)
    for step in steps:
        if step[0] == "wait":
            clock.now += step[1]
        elif step[0] == "announce":
            plan.announce(f"m{step[1]}", step[2])
        elif step[0] == "open":
            on_connections = {source for c in plan.in_flight.values() for source in c.sources}
            waiting: dict[str, set[str]] = {}
            for source, host in plan.location.items():
                if source not in plan.fetched and source not in on_connections:
                    waiting.setdefault(host, set()).add(source)
            penalized = {host for host, until in plan.penalized.items() if until > clock.now}
            drawable = {host for host in waiting if host not in plan.in_flight and host not in penalized}
            room = parallel - len(plan.in_flight)
            opened, passed = plan.open_passing_over(step[1])
            hosts = [c.host for c in opened]
            allowed = {host for host in drawable if group_of[host] not in step[1]}
            assert len(set(hosts)) == len(hosts) and set(hosts) <= allowed
            assert len(hosts) == max(0, min(room, len(allowed)))
            assert all(
                set(c.sources) <= waiting[c.host] and len(c.sources) == min(per_connection, len(waiting[c.host]))
                for c in opened
            )
            waited_for = {group_of[host] for host in drawable} & step[1] if room > 0 else set()
            assert len(passed) == len(set(passed)) and set(passed) == waited_for
        elif plan.in_flight:
            connection = list(plan.in_flight.values())[step[1] % len(plan.in_flight)]
            if step[0] == "done":
                plan.done(connection)
            else:
                plan.failed(connection)
        on_connections = {source for c in plan.in_flight.values() for source in c.sources}
        left = Counter(
            group_of[host]
            for source, host in plan.location.items()
            if source not in plan.fetched and source not in on_connections
        )
        assert {g: n for g, n in plan.waiting_by_group.items() if n} == dict(left)


def test_connections_sharing_one_pacer_hold_the_task_to_its_rate_together():
    pacer = Pacer(Rate(8e6), saved_s=0.0)  # 1 MB/s for the task

    def copy() -> None:
        for _ in range(10):
            pacer.take(25_000)

    start = time.monotonic()
    threads = [threading.Thread(target=copy) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - start >= 0.95  # 1 MB in all at 1 MB/s (four pacers would take 0.25 s)


def test_a_tasks_flows_share_its_link_and_get_fair_parts_of_it():
    fabric = FabricSpec(racks=2, hosts_per_rack=2, host_rate_mbps=100, eps_rate_mbps=1000, ocs_rate_mbps=100)
    links = FabricLinks(fabric, {"r0h0": 0, "r0h1": 0, "r1h0": 1, "r1h1": 1})
    table = FlowTable(links)
    task = build_job(JobSpec("j", 0, 1, 0, 0, 1, 0, 1, 1), Resources()).maps[0]
    link = table.open_task_link(30.0)
    flows = [Flow("shuffle", task, 0, None, src, "r1h1", 1000, 0.0) for src in ("r0h0", "r0h1", "r1h0")]
    for flow in flows:
        table.add(flow, np.inf, None, task_link=link)
    table.settle()
    assert table.rate[:3] == pytest.approx([10.0] * 3)  # 30 B/s shared three ways
    table.set_task_link(link, 90.0)
    table.settle()
    assert table.rate[:3] == pytest.approx([30.0] * 3)
    other = table.open_task_link(5.0)
    assert other != link
    table.add(Flow("shuffle", task, 0, None, "r0h0", "r1h0", 1000, 0.0), np.inf, None, task_link=other)
    table.settle()
    assert table.rate[3] == pytest.approx(5.0) and table.rate[0] == pytest.approx(30.0)


def test_the_simulator_fetches_over_one_connection_per_map_host_held_to_the_task_cap(tmp_path):
    out = simulate(tmp_path, "fair", "capped", **{"workers.task_rate_cap_mbps": 2})
    tasks, flows = pd.read_csv(out / "tasks.csv"), pd.read_csv(out / "flows.csv")
    shuffle = flows[flows.kind == "shuffle"].groupby("task_id")
    reducers = pd.DataFrame(
        {
            "connections": shuffle.size(),
            "hosts": shuffle.src_host.nunique(),
            "job_id": shuffle.job_id.first(),
            "rate_mbps": shuffle.bytes.sum() * 8 / 1e6 / (shuffle.end_s.max() - shuffle.start_s.min()),
        }
    )
    maps = tasks[tasks.kind == "map"].groupby("job_id")
    reducers["maps"] = reducers.job_id.map(maps.size())
    reducers["map_hosts"] = reducers.job_id.map(maps.host.nunique())
    assert len(reducers) == (tasks.kind == "reduce").sum()
    # one connection per host (each copying up to 20 outputs): fewer connections than maps where a host ran several
    assert (reducers.hosts <= reducers.map_hosts).all() and (reducers.connections <= reducers.maps).all()
    assert (reducers.connections < reducers.maps).any()
    # the 2 Mb/s cap holds each reducer's connections together (per connection, several would make more)
    assert (reducers.rate_mbps <= 2 * 1.01).all()
    assert ((reducers.connections > 1) & (reducers.rate_mbps > 1.9)).any()


def test_in_steering_mode_elephant_only_elephant_aggregates_ride_the_circuits(tmp_path):
    out = simulate(tmp_path, "jobpacker", "elephant", **{"ocs.steering": "elephant"})
    flows, events = pd.read_csv(out / "flows.csv"), pd.read_csv(out / "ocs_events.csv")
    cross = flows[flows.src_rack != flows.dst_rack]
    elephants, mice = cross[cross.elephant == 1], cross[cross.elephant == 0]
    assert len(events) and len(elephants) and len(mice)
    assert (flows[flows.elephant == 1].kind == "shuffle").all()  # input reads and in-rack copies never are
    assert elephants.ocs_bytes.sum() > 0 and mice.ocs_bytes.sum() == 0
    # an aggregate is an elephant once its announced bytes reach the (scaled) threshold
    threshold = 100_000_000 * 0.001
    shuffle = cross[cross.kind == "shuffle"].groupby(["job_id", "src_rack", "dst_rack"])
    aggregates = pd.DataFrame({"bytes": shuffle.bytes.sum(), "elephant": shuffle.elephant.max()})
    assert (aggregates[aggregates.elephant == 1].bytes >= threshold).all()
    assert (aggregates[aggregates.bytes < threshold].elephant == 0).all()
    everything = pd.read_csv(simulate(tmp_path, "jobpacker", "all") / "flows.csv")
    assert everything[everything.src_rack != everything.dst_rack].ocs_bytes.sum() > elephants.ocs_bytes.sum()


def test_elephants_wait_leaves_a_fabric_without_circuits_as_it_is(tmp_path):
    """F-EPS (`fabric.variant: f-eps`) has no OCS: its elephants cross the core like every other flow."""
    ocs = {"ocs.steering": "elephant", "ocs.elephant_threshold_bytes": 300e6, "fabric.variant": "f-eps"}
    runs = [
        simulate(tmp_path, "fair", f"f-eps-{wait}", **ocs, **{"ocs.elephants_wait": wait}) for wait in (False, True)
    ]
    jobs = [pd.read_csv(out / "jobs.csv").set_index("job_id").finish_s for out in runs]
    flows = pd.read_csv(runs[1] / "flows.csv")
    assert (flows.elephant == 1).any() and jobs[0].equals(jobs[1])


@pytest.mark.parametrize("policy", ["jobpacker", "fair"])
def test_with_elephants_wait_an_elephant_crosses_racks_only_over_a_circuit(tmp_path, policy):
    """JobPacker §2.2: the elephant matrix is sent via the OCS and the rest via the EPS, so an elephant whose
    rack pair has no circuit waits for one (whoever hints or measures its demand: Fair hints nothing)."""
    ocs = {"ocs.steering": "elephant", "ocs.elephant_threshold_bytes": 300e6}
    cross = {}
    for wait in (False, True):
        out = simulate(tmp_path, policy, f"wait-{wait}", **ocs, **{"ocs.elephants_wait": wait})
        flows = pd.read_csv(out / "flows.csv")
        cross[wait] = flows[flows.src_rack != flows.dst_rack]
        summary = json.loads((out / "summary.json").read_text())
        assert summary["jobs_done"] == len(pd.read_csv(out / "jobs.csv"))
        assert summary["reconfigurations"] > 0 or not wait  # what waits is demand (Fair's measured one may not be)
    elephants, mice = cross[True][cross[True].elephant == 1], cross[True][cross[True].elephant == 0]
    assert len(elephants) and len(mice)
    # every byte of an elephant went over a circuit, none of a mouse's (but a flow finishes FINISH_FRACTION of
    # its time so far early: those last bytes, at most at its host's rate, are counted sent on no link)
    host_bytes_s = json.loads((out / "scenario.json").read_text())["fabric"]["host_rate_mbps"] * 1e6 / 8
    early = FINISH_FRACTION * (elephants.end_s - elephants.start_s) * host_bytes_s
    assert (elephants.ocs_bytes >= elephants.bytes - early - 1).all() and (mice.ocs_bytes == 0).all()
    # without waiting, elephants take the EPS while their pair is dark
    before = cross[False][cross[False].elephant == 1]
    assert (before.ocs_bytes < before.bytes * 0.9).any()


def test_elephants_wait_longer_for_circuits_that_are_reconfigured_less_often(tmp_path):
    """A rack pair's elephants wait from the first held back to its circuit lighting, and circuits light only at
    reconfigurations: with one every 5 s instead of every second they wait longer; without waiting, nothing is
    told."""
    ocs = {"ocs.steering": "elephant", "ocs.elephant_threshold_bytes": 300e6}
    waits = {}
    for interval in (1, 5):
        out = simulate(
            tmp_path,
            "fair",
            f"every-{interval}",
            **ocs,
            **{"ocs.elephants_wait": True, "ocs.reconfig_interval_s": interval},
        )
        summary = json.loads((out / "summary.json").read_text())
        assert summary["elephant_waits"] > 0
        assert 0 < summary["elephant_wait_median_s"] <= summary["elephant_wait_p95_s"] <= summary["elephant_wait_max_s"]
        assert summary["elephant_wait_max_s"] < summary["makespan_s"]
        waits[interval] = summary
    assert waits[5]["elephant_wait_median_s"] > 2 * waits[1]["elephant_wait_median_s"]
    assert waits[5]["elephant_wait_max_s"] > waits[1]["elephant_wait_max_s"]
    unheld = json.loads((simulate(tmp_path, "fair", "unheld", **ocs) / "summary.json").read_text())
    assert not any(key.startswith("elephant_wait") for key in unheld)


def test_jobpacker_marks_its_planned_rack_pairs_elephants_from_their_first_byte(tmp_path):
    """JobPacker's profiler sizes a job planned on the OCS so that each (map rack, reduce rack) pair of its plan
    carries at least the threshold (§4.3.1), and its aggregated shuffle rides circuits (§4.2): every connection
    of such a pair is an elephant, also those announced before the pair's bytes reached the threshold."""
    out = simulate(
        tmp_path, "jobpacker", "planned", **{"ocs.steering": "elephant", "ocs.elephant_threshold_bytes": 1e9}
    )
    plan = pd.read_csv(out / "plan.csv", dtype={"map_racks": str, "reduce_racks": str})
    flows = pd.read_csv(out / "flows.csv")
    shuffle = flows[(flows.kind == "shuffle") & (flows.src_rack != flows.dst_rack)]
    planned = set()
    for row in plan[plan.uses_ocs].itertuples():
        planned |= {(row.job_id, int(a), int(b)) for a in row.map_racks.split() for b in row.reduce_racks.split()}
    on_plan = shuffle.apply(lambda f: (f.job_id, f.src_rack, f.dst_rack) in planned, axis=1)
    assert on_plan.any() and (shuffle[on_plan].elephant == 1).all()
    # pairs below the (scaled) threshold among them: announced bytes alone would have left those mice
    pairs = shuffle[on_plan].groupby(["job_id", "src_rack", "dst_rack"]).bytes.sum()
    assert (pairs < 1e9 * 0.001).any()
    others = shuffle[~on_plan].groupby(["job_id", "src_rack", "dst_rack"]).agg({"bytes": "sum", "elephant": "max"})
    assert (others[others.elephant == 1].bytes >= 1e9 * 0.001).all()  # elephants by their announced bytes


def three_racks_waiting_for_circuits(tmp_path: Path) -> tuple[Simulation, ResultLogs]:
    """Three racks of six 10 Mb/s hosts, one 20 Mb/s OCS port each, elephants of 1 MB or more waiting for their
    circuit: the simulation, logging into tmp_path."""
    scenario = Scenario.model_validate(
        {
            "name": "three-racks",
            "backend": "simulation",
            "fabric": {"racks": 3, "hosts_per_rack": 6, "host_rate_mbps": 10, "ocs_rate_mbps": 20},
            "ocs": {
                "mode": "periodic",
                "steering": "elephant",
                "elephants_wait": True,
                "elephant_threshold_bytes": 1e6,
            },
            "workers": {"slots_per_host": 1, "cores_per_host": 1, "memory_mb_per_host": 256},
            "scheduler": {"policy": "fair", "slowstart": 1.0},
            "max_duration_s": 5000,
        }
    )
    logs = result_logs(tmp_path)
    return Simulation(scenario, logs), logs


def reducer_racks(simulation: Simulation) -> tuple[ReduceFetches, int, int, int] | None:
    """The three-rack case's reducer once it runs: its shuffle, its rack and the two map racks."""
    fetches = next(iter(simulation._reduces.values()), None)
    if fetches is None:
        return None
    rack = simulation.cluster.rack_of[str(fetches.task.host)]
    first, other = (r for r in range(3) if r != rack)
    return fetches, rack, first, other


class FetchersHeld:
    """Since when the three-rack case's reducer has held all of its five connections from one map rack."""

    def __init__(self, simulation: Simulation) -> None:
        self.simulation = simulation
        self.since: float | None = None

    def held_from(self, rack: int, now: float) -> float:
        """For how long, in seconds, up to `now` (0 until it does)."""
        racks = reducer_racks(self.simulation)
        if self.since is None and racks is not None:
            in_flight = racks[0].plan.in_flight
            rack_of = self.simulation.cluster.rack_of
            if len(in_flight) == 5 and {rack_of[host] for host in in_flight} == {rack}:
                self.since = now
        return 0.0 if self.since is None else now - self.since


def test_a_connection_stopped_past_the_read_timeout_gives_its_fetcher_back(tmp_path):
    """Hadoop's Fetcher fails a connection that reads nothing for mapreduce.reduce.shuffle.read.timeout. A
    reducer whose five fetchers hold connections stopped on a dark pair fetches over the pair whose circuit is
    lit once they time out, rather than leave that circuit idle for as long as it stays lit; the outputs the
    stopped connections copied whole are kept, and no output is fetched twice."""
    simulation, logs = three_racks_waiting_for_circuits(tmp_path)
    held: dict[str, float | None] = {"lit_other": None}  # phase 2
    five_fetchers = FetchersHeld(simulation)

    def scripted_hints(cluster) -> list[list[float]]:
        """Light the circuit from one map rack into the reducer's until its five fetchers have held
        connections from that rack for 25 s (some have copied outputs whole by then), then only the one from
        the other map rack, for longer than the read timeout; then nothing (what waits is the demand)."""
        hints = [[0.0] * 3 for _ in range(3)]
        if (racks := reducer_racks(simulation)) is None:
            return hints
        fetches, rack, first, other = racks
        now = simulation.now
        if held["lit_other"] is None and five_fetchers.held_from(first, now) >= 25:
            held["lit_other"] = now
        if held["lit_other"] is None:
            hints[first][rack] = 1e15
        elif now < held["lit_other"] + SHUFFLE_READ_TIMEOUT_S + 100:
            hints[other][rack] = 1e15
        return hints

    simulation.policy.ocs_demand = scripted_hints  # type: ignore[method-assign]
    shuffle = 360_000_000
    simulation.run([JobSpec("j", 0.0, 36_000_000, shuffle, 0, 36, 1, 1.0, 1.0)])
    logs.close()
    lit_other = held["lit_other"]
    assert lit_other is not None
    flows = pd.read_csv(tmp_path / "flows.csv")
    fetched = flows[flows.kind == "shuffle"]
    reducer_rack = int(fetched.dst_rack.iloc[0])
    first, other = (r for r in range(3) if r != reducer_rack)
    timed_out = lit_other + SHUFFLE_READ_TIMEOUT_S
    # the stopped connections broke at the read timeout, each logged with the outputs (10 MB each) it had copied
    broken = fetched[(fetched.src_rack == first) & (fetched.end_s == timed_out)]
    assert len(broken) and (broken.bytes % (shuffle // 36) == 0).all()
    assert simulation.elephant_wait_summary()["shuffle_read_timeouts"] == 5  # those that copied nothing whole too
    # their fetchers went to the lit pair's hosts, and fetched over it while it stayed lit
    over_lit = fetched[(fetched.src_rack == other) & (fetched.end_s < timed_out + 100)]
    assert len(over_lit) and over_lit.start_s.min() >= timed_out
    assert (over_lit.ocs_bytes == over_lit.bytes).all()
    # every output fetched once: the bytes under way when a connection broke are not counted
    assert fetched.bytes.sum() == pd.read_csv(tmp_path / "tasks.csv").fetched_bytes.sum() == shuffle
    assert simulation.core.finished


def test_a_host_whose_connection_broke_is_fetched_from_again_when_its_penalty_is_over(tmp_path):
    """Hadoop penalizes the host of a connection that broke (ShuffleSchedulerImpl.copyFailed): a reducer whose
    stopped connections time out does not take their hosts again the moment their pair lights, but when each
    host's penalty is over, 13 s after a first failure."""
    simulation, logs = three_racks_waiting_for_circuits(tmp_path)
    rack_of = simulation.cluster.rack_of
    phase: dict[str, float | None] = {"dark": None, "relit": None}
    five_fetchers = FetchersHeld(simulation)
    penalized: dict[str, float] = {}

    def scripted_hints(cluster) -> list[list[float]]:
        """The circuit from one map rack into the reducer's until its five fetchers have held connections from
        it for 25 s; then the two map racks' circuits to each other, so that nothing reaches the reducer's
        rack, until those connections have timed out; then the first circuit again for 100 s; then nothing
        (what waits is the demand)."""
        hints = [[0.0] * 3 for _ in range(3)]
        if (racks := reducer_racks(simulation)) is None:
            return hints
        fetches, rack, first, other = racks
        now = simulation.now
        if phase["dark"] is None and five_fetchers.held_from(first, now) >= 25:
            phase["dark"] = now
        dark = phase["dark"]
        if dark is not None and now > dark + SHUFFLE_READ_TIMEOUT_S and phase["relit"] is None:
            phase["relit"] = now
            penalized.update(fetches.plan.penalized)
        relit = phase["relit"]
        if dark is None or (relit is not None and now < relit + 100):
            hints[first][rack] = 1e15
        elif relit is None:
            hints[first][other] = hints[other][first] = 1e15
        return hints

    simulation.policy.ocs_demand = scripted_hints  # type: ignore[method-assign]
    simulation.run([JobSpec("j", 0.0, 36_000_000, 360_000_000, 0, 36, 1, 1.0, 1.0)])
    logs.close()
    dark, relit = phase["dark"], phase["relit"]
    assert dark is not None and relit is not None
    timed_out = dark + SHUFFLE_READ_TIMEOUT_S
    assert list(penalized.values()) == pytest.approx([timed_out + penalty_s(1)] * 5)  # the five broken ones
    flows = pd.read_csv(tmp_path / "flows.csv")
    fetched = flows[flows.kind == "shuffle"]
    lit_again = fetched[
        (fetched.start_s > timed_out) & fetched.src_host.map(rack_of).eq(rack_of[next(iter(penalized))])
    ]
    again = lit_again[lit_again.src_host.isin(set(penalized))]
    # not when the pair lit again, but the moment the penalties were over
    assert again.start_s.min() == pytest.approx(timed_out + penalty_s(1), abs=1e-3)
    assert simulation.core.finished


def test_a_pair_keeps_its_circuit_while_bytes_are_queued_for_it(tmp_path):
    """What is queued for a rack pair (what its connections have left, the outputs its reducers have still to
    open from it) is its demand whether its circuit is lit or dark. Counted only while dark, it left the demand
    the moment the circuit lit, and a reducer fetching from two racks saw its circuit turned away or dark in
    every other interval while both still had bytes for it."""
    simulation, logs = three_racks_waiting_for_circuits(tmp_path)
    scenario = simulation.scenario
    simulation.run([JobSpec("j", 0.0, 36_000_000, 360_000_000, 0, 36, 1, 1.0, 1.0)])
    logs.close()
    flows = pd.read_csv(tmp_path / "flows.csv")
    shuffle = flows[flows.kind == "shuffle"]
    rack = int(shuffle.dst_rack.iloc[0])
    cross = shuffle[shuffle.src_rack != rack]
    assert set(cross.src_rack) == {r for r in range(3) if r != rack}
    start, end = cross.start_s.min(), cross.end_s.max()
    # the circuit into the reducer's rack: dark only while it is being set up (the reconfiguration delay)
    events = pd.read_csv(tmp_path / "ocs_events.csv")
    dark, lit_until, into_rack = 0.0, start, False
    for event in events[events.dark_from_s < end].itertuples():
        if not into_rack:
            dark += max(0.0, event.dark_from_s - max(lit_until, start))
        dark += max(0.0, min(event.dark_until_s, end) - max(event.dark_from_s, start))
        into_rack = any(c["dst_rack"] == rack for c in json.loads(event.circuits_after))
        lit_until = event.dark_until_s
    if not into_rack:
        dark += end - lit_until
    delay_s = scenario.ocs.reconfig_delay_ms / 1000
    turns = len(events[(events.dark_from_s >= start) & (events.dark_from_s < end)])
    assert dark <= turns * delay_s + 1e-6
    assert turns < (end - start) / scenario.ocs.reconfig_interval_s / 4  # not every other interval
