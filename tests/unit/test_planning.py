"""Offline planning without a network: the OCS transfer model, the latency response function, the Corral
and JobPacker planners, and their run-time policies driven by the scheduler core."""

from __future__ import annotations

import heapq
import random
from collections import Counter, defaultdict
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridbed.config.constants import FIG5_MAP_S, FIG5_REDUCE_S
from hybridbed.controller.circuits import drain_time
from hybridbed.policies.corral import CorralPolicy
from hybridbed.policies.jobpacker import JobPackerPolicy
from hybridbed.policies.planning.corral import plan_corral
from hybridbed.policies.planning.jobpacker import JobPackerPlanner, green_zone, sub_batches
from hybridbed.policies.planning.latency import JobProfile, LatencyModel
from hybridbed.policies.planning.timeline import Timeline
from hybridbed.scheduler.cluster import ClusterState, HostState, NetworkView
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.model import JobSpec, Predicted, Resources, StageKind, build_job
from tests.clusters import grid_cluster

GB = 1e9
CONTAINER = Resources(1, 256)


def shuffle_matrix(maps_per_rack: list[int], shuffle: float) -> list[list[float]]:
    """Fig. 2: equal output per map, one reducer per rack consuming an equal share."""
    per_map = shuffle / sum(maps_per_rack)
    racks = len(maps_per_rack)
    return [[m * per_map / racks for _ in range(racks)] for m in maps_per_rack]


def test_fig2_skewed_placement_takes_60_and_balanced_18_75():
    assert drain_time(shuffle_matrix([16, 2, 1, 1], 100), rate=1.0) == pytest.approx(60)
    assert drain_time(shuffle_matrix([5, 5, 5, 5], 100), rate=1.0) == pytest.approx(18.75)


def profile(job_id="j", maps=20, reduces=4, shuffle=100.0, map_s=1.0, reduce_s=1.0, arrival=0.0) -> JobProfile:
    return JobProfile(job_id, arrival, maps, reduces, shuffle, shuffle, map_s, reduce_s)


def test_lrf_shuffle_term_is_the_circuit_transfer_time_of_a_balanced_job():
    model = LatencyModel(4, 100, NetworkView(eps_uplink_Bps=0.1, ocs_Bps=1.0, elephant_bytes=1.0))
    job = profile()
    assert model.uses_ocs(job, 4, 4)
    assert model.shuffle_latency(job, 4, 4) == pytest.approx(drain_time(shuffle_matrix([5, 5, 5, 5], 100), 1.0))
    # the paper's D = D_s / (r_map r_red) (r_red - 1) whenever the two widths agree
    for r in range(1, 5):
        assert model.busiest_port_bytes(job, r, r) == pytest.approx(100 / (r * r) * (r - 1))
    # one reduce rack takes in what five map racks send through its single port
    assert model.busiest_port_bytes(job, 6, 1) == pytest.approx(100 / 6 * 5)
    # ... or all six, when it runs no maps; and disjoint single racks move the whole shuffle
    assert model.busiest_port_bytes(job, 6, 1, shared=0) == pytest.approx(100)
    assert model.busiest_port_bytes(job, 1, 1, shared=0) == pytest.approx(100)
    assert model.busiest_port_bytes(job, 1, 1) == 0


# The paper's Fig. 5 (15 racks x 600 containers; a job of 3472 maps and 169 reduces; rows r_map, columns
# r_red). Rows 1-5 as printed; from row 6 on the printed rows have 16 entries for 15 columns, so only
# their two values are kept: the green zone's (by r_red; 201 from r_red = 6 on) and the EPS zone's.
FIG5_ROWS = {
    1: [630] * 15,
    2: [379] + [373] * 14,
    3: [295, 289] + [287] * 13,
    4: [295, 289, 287] + [286] * 12,
    5: [295, 289, 287, 286] + [285] * 11,
}
FIG5_GREEN = [211, 205, 203, 202, 202] + [201] * 10
FIG5_EPS = {6: 401, 7: 372, 8: 351, 9: 334, 10: 320, 11: 309, 12: 300, 13: 292, 14: 286, 15: 280}


def fig5_model() -> tuple[LatencyModel, JobProfile]:
    """The paper's Fig. 5 job at its simulation rates (§5.1.2: 30 Gb/s uplinks, 100 Gb/s circuits, a 1.125 GB
    threshold); about 90 GB of shuffle (the green zone's edge), per-task times read off two cells."""
    network = NetworkView(eps_uplink_Bps=30e9 / 8, ocs_Bps=100e9 / 8, elephant_bytes=1.125 * GB)
    job = profile("fig5", 3472, 169, 90 * GB, map_s=FIG5_MAP_S, reduce_s=FIG5_REDUCE_S)
    return LatencyModel(15, 600, network), job


def test_fig5_latency_falls_with_every_map_wave_saved_until_one_wave():
    model, job = fig5_model()
    assert [model.waves(job.n_maps, r) for r in range(1, 8)] == [6, 3, 2, 2, 2, 1, 1]
    for r_red in range(1, 16):
        row = {r_map: model.latency(job, r_map, r_red) for r_map in range(1, 16)}
        assert row[1] > row[2] > max(row[3], row[4], row[5])  # 6, 3, then 2 waves
        assert min(row[3], row[4], row[5]) > max(row[r] for r in range(6, 16))  # one wave from 6 racks on


def test_fig5_table_outside_the_eps_zone_within_five_percent():
    """Every cell of rows 1-5 and every green-zone cell: 2 durations read off the table, the rest from the
    waves and the circuit transfer time."""
    model, job = fig5_model()
    off = {}
    for r_map in range(1, 16):
        for r_red in range(1, 16):
            if r_map <= 5:
                paper = FIG5_ROWS[r_map][r_red - 1]
            elif model.uses_ocs(job, r_map, r_red):
                paper = FIG5_GREEN[r_red - 1]
            else:
                continue
            off[(r_map, r_red)] = model.latency(job, r_map, r_red) / paper - 1
    assert len(off) > 150 and max(abs(x) for x in off.values()) <= 0.05, off


def test_fig5_green_zone_is_single_wave_and_on_the_ocs_and_beats_the_eps_zone_by_what_the_fabric_gives():
    """The EPS zone costs the pairs at the uplink's share (30 Gb/s / 14 racks each): seconds here, where the
    paper's 401-280 imply a sending rack gets 0.56-0.6 Gb/s in all, which hybridbed does not assume."""
    model, job = fig5_model()
    zone = set(green_zone(job, model))
    expected = {(m, r) for m in range(6, 16) for r in range(1, 16) if 90 * GB / (m * r) > 1.125 * GB}
    assert zone == expected
    for r_map in range(6, 16):
        eps_zone = [model.latency(job, r_map, r) for r in range(1, 16) if (r_map, r) not in zone]
        best_green = min(model.latency(job, r_map, r) for r in range(1, 16) if (r_map, r) in zone)
        assert eps_zone and best_green < min(eps_zone) and max(eps_zone) < FIG5_EPS[r_map]


def test_the_eps_price_is_the_uplink_shared_by_the_other_racks_and_the_ocs_one_circuit_at_a_time():
    model = LatencyModel(5, 100, NetworkView(eps_uplink_Bps=4.0, ocs_Bps=10.0, elephant_bytes=2.0))
    heavy, light = profile(shuffle=100.0), profile(shuffle=10.0)
    assert model.eps_pair_Bps == 1.0  # 4 B/s over 4 other racks
    assert model.uses_ocs(heavy, 2, 2) and not model.uses_ocs(light, 2, 4)
    assert model.shuffle_latency(heavy, 2, 2) == pytest.approx(25.0 * 1 / 10.0)  # 1 pair at the port
    assert model.shuffle_latency(heavy, 4, 4) == pytest.approx(6.25 * 3 / 10.0)  # 3 pairs, one after another
    assert model.shuffle_latency(light, 2, 4) == pytest.approx(1.25 / 1.0)  # 3 pairs at once, each at its share
    assert model.shuffle_latency(light, 1, 1) == 0.0


def recurring_specs(count: int, seed: int, arrival_window: float = 0.0) -> list[JobSpec]:
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        maps, reduces = rng.randint(1, 14), rng.randint(1, 6)
        shuffle = int(rng.choice([0.2, 1, 8, 30]) * 1e6)
        arrival = round(rng.uniform(0, arrival_window), 1)
        specs.append(
            JobSpec(
                f"j{i}",
                arrival,
                maps * 1_000_000,
                shuffle,
                1000,
                maps,
                reduces,
                rng.uniform(1, 4),
                rng.uniform(1, 4),
                recurring=True,
                predicted=Predicted(arrival, maps * 1_000_000, shuffle, 1000),
            )
        )
    return specs


def network() -> NetworkView:
    return NetworkView(eps_uplink_Bps=250_000, ocs_Bps=2_500_000, elephant_bytes=2_000_000)


def assert_valid_plan(plan, specs, racks):
    # every task of every recurring job is planned, once
    counts = defaultdict(int)
    for b in plan.bookings:
        counts[(b.job_id, b.kind)] += 1
    for s in specs:
        assert counts[(s.job_id, StageKind.MAP)] == s.n_maps
        assert counts[(s.job_id, StageKind.REDUCE)] == s.n_reduces
    # no container is double-booked
    by_container = defaultdict(list)
    for b in plan.bookings:
        by_container[(b.rack, b.container)].append((b.start_s, b.end_s))
    for intervals in by_container.values():
        intervals.sort()
        assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in zip(intervals, intervals[1:]))
    # reduces start after the maps, nothing before its job arrives, bookings stay on the planned racks
    arrivals = {s.job_id: s.arrival_s for s in specs}
    for b in plan.bookings:
        job = plan.jobs[b.job_id]
        stage = job.maps if b.kind is StageKind.MAP else job.reduces
        assert b.rack in stage.racks and b.start_s >= arrivals[b.job_id] - 1e-9
        if b.kind is StageKind.REDUCE:
            assert b.start_s >= job.maps.end_s - 1e-9
    assert sorted(j for seq in plan.sequences.values() for j, _ in seq) == sorted(
        (j for j, p in plan.jobs.items() for stage in (p.maps, p.reduces) if stage for _ in stage.racks)
    )
    assert set(plan.sequences) == set(range(racks))


@pytest.mark.parametrize("window", [0.0, 30.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_jobpacker_plan_books_every_task_once_without_overlap(seed, window):
    specs = recurring_specs(25, seed, window)
    model = LatencyModel(5, 4, network())
    plan = JobPackerPlanner(model, sub_batch_count=5).plan([JobProfile.of(s) for s in specs])
    assert_valid_plan(plan, specs, 5)


@pytest.mark.parametrize("window", [0.0, 30.0])
def test_corral_plan_books_every_task_once_on_shared_racks(window):
    specs = recurring_specs(25, 3, window)
    model = LatencyModel(5, 4, network(), ocs_aware=False)
    plan = plan_corral([JobProfile.of(s) for s in specs], model)
    assert_valid_plan(plan, specs, 5)
    assert all(set(p.reduces.racks) <= set(p.maps.racks) for p in plan.jobs.values())


def test_corral_widens_a_job_until_its_maps_run_in_one_wave_unless_the_shuffle_costs_more():
    model = LatencyModel(5, 4, network(), ocs_aware=False)
    light = profile("light", maps=16, reduces=4, shuffle=0, map_s=10, reduce_s=1)
    plan = plan_corral([light], model)
    assert len(plan.jobs["light"].maps.racks) == 4 and plan.makespan_s == pytest.approx(10 + 1)
    heavy = profile("heavy", maps=16, reduces=4, shuffle=50e6, map_s=10, reduce_s=1)  # 200 s per rack on the EPS
    assert len(plan_corral([heavy], model).jobs["heavy"].maps.racks) == 1


def test_sub_batches_split_every_demand_evenly():
    jobs = [
        profile(f"j{i}", maps=m, reduces=r, shuffle=s)
        for i, (m, r, s) in enumerate(
            [
                (40, 10, 90),
                (35, 9, 80),
                (30, 8, 70),
                (5, 1, 5),
                (4, 1, 4),
                (6, 2, 6),
                (20, 5, 40),
                (22, 5, 45),
                (3, 1, 2),
                (2, 1, 1),
            ]
        )
    ]
    batches = sub_batches(jobs, 3)
    assert sorted(j.job_id for b in batches for j in b) == sorted(j.job_id for j in jobs)
    totals = [sum(j.n_maps for j in b) for b in batches]
    assert max(totals) - min(totals) <= 25  # a widest-first split would put the three big jobs together
    assert all(len([j for j in b if j.n_maps >= 30]) == 1 for b in batches)


def test_sub_batch_score_is_the_dot_product_of_demand_and_remaining_capacity():
    # footnote 1: (0.1, 0.2, 0.3) . (0.2, 0.3, 0.5) = 0.23; the job with the larger product goes first
    jobs = [profile("small", maps=1, reduces=1, shuffle=1), profile("big", maps=3, reduces=3, shuffle=3)]
    assert [j.job_id for j in sub_batches(jobs, 1)[0]] == ["big", "small"]


def cluster(racks=4, hosts=2, slots=2, slowstart=1.0) -> ClusterState:
    return grid_cluster(racks, hosts, slots, slowstart, network())


def run_to_completion(policy, specs, state: ClusterState, watch: Callable[[], None] | None = None) -> dict:
    """Drive the scheduler core: every running task finishes one second after it starts (`watch` is called after
    every round of launches)."""
    core = SchedulerCore(policy, state, random.Random(1))
    policy.plan(specs, state)
    jobs = {}
    pending = sorted(specs, key=lambda s: s.arrival_s)
    now = 0.0
    while len(core.finished) < len(specs):
        while pending and pending[0].arrival_s <= now:
            s = pending.pop(0)
            jobs[s.job_id] = build_job(s, CONTAINER)
            core.submit(jobs[s.job_id], now)
        core.schedule(now)
        core.shuffle_notices()
        if watch is not None:
            watch()
        now += 1.0
        for host in state.hosts.values():
            for task in list(host.running.values()):
                core.task_finished(task.task_id, task.attempt, now)
        assert now < 10_000
    return jobs


@pytest.mark.parametrize("policy_class", [JobPackerPolicy, CorralPolicy])
def test_a_rack_offers_a_planned_job_as_soon_as_it_is_launchable(policy_class):
    state = cluster(racks=1, hosts=1)
    (spec,) = recurring_specs(1, 4)
    policy = policy_class(node_delay_s=0, rack_delay_s=0)
    policy.plan([spec], state)
    core = SchedulerCore(policy, state, random.Random(1))
    host = next(iter(state.hosts.values()))
    assert policy.next_task(host, state) is None  # planned here, not arrived
    job = build_job(spec, CONTAINER)
    core.submit(job, 0.0)
    assert policy.next_task(host, state) in job.maps


@pytest.mark.parametrize("policy_class", [JobPackerPolicy, CorralPolicy])
def test_ad_hoc_jobs_arriving_among_planned_ones_get_the_containers_the_plans_leave(policy_class):
    recurring = recurring_specs(6, 3, arrival_window=8.0)
    adhoc = [JobSpec(f"a{i}", 2.0 * i, 1_000_000, 1_000_000, 0, 3, 1, 1, 1) for i in range(5)]  # each after the last
    policy = policy_class()
    run_to_completion(policy, recurring + adhoc, cluster(racks=2, hosts=1))  # fails if a job never finishes
    assert set(policy.offline.jobs) == {s.job_id for s in recurring}  # the others ran as ad-hoc jobs


@pytest.mark.parametrize("policy_class", [JobPackerPolicy, CorralPolicy])
def test_planned_jobs_run_and_keep_their_data_on_their_racks(policy_class):
    specs = recurring_specs(10, 5)
    state = cluster()
    policy = policy_class()
    jobs = run_to_completion(policy, specs, state)
    rows = {row["job_id"]: row for row in policy.plan_rows()}
    assert set(rows) == set(jobs) and all(row["map_racks"] for row in rows.values())
    for job_id, job in jobs.items():
        planned = policy.offline.jobs[job_id]
        for m in job.maps:
            assert state.rack_of[m.host] in planned.maps.racks
            assert any(state.rack_of[h] in planned.maps.racks for h in m.input_block.replicas)
        for r in job.reduces:
            assert state.rack_of[r.host] in planned.reduces.racks
        per_rack = defaultdict(int)
        for r in job.reduces:
            per_rack[state.rack_of[r.host]] += 1
        assert max(per_rack.values()) <= -(-len(job.reduces) // len(planned.reduces.racks))


def off_rack_reads(jobs: dict, state: ClusterState) -> int:
    """Maps that ran on a rack holding no replica of their block."""
    return sum(
        1
        for job in jobs.values()
        for m in job.maps
        if all(state.rack_of[h] != state.rack_of[m.host] for h in m.input_block.replicas)
    )


def test_planned_maps_wait_for_a_rack_holding_their_block_before_reading_across_racks():
    specs = recurring_specs(10, 5)
    eager = cluster()
    assert off_rack_reads(run_to_completion(JobPackerPolicy(node_delay_s=0, rack_delay_s=0), specs, eager), eager) > 0
    patient = cluster()
    jobs = run_to_completion(JobPackerPolicy(node_delay_s=3, rack_delay_s=3), specs, patient)
    assert off_rack_reads(jobs, patient) == 0


def test_jobpacker_holds_the_shuffle_until_running_reducers_reach_the_threshold():
    state = cluster(racks=2, hosts=2, slots=2, slowstart=0.0)
    policy = JobPackerPolicy()
    spec = JobSpec("big", 0, 4_000_000, 4_000_000, 0, 4, 4, 1, 1, recurring=True)  # 1 MB per reducer
    core = SchedulerCore(policy, state, random.Random(1))
    policy.plan([spec], state)
    job = build_job(spec, CONTAINER)
    core.submit(job, 0.0)
    for m, host in zip(job.maps, ["r0h0", "r0h0", "r0h1", "r0h1"]):  # every map done on rack 0
        core._start(m, state.hosts[host], 0.0)
        core.task_finished(m.task_id, m.attempt, 1.0)
    reducers = job.reduces
    for count, released in ((1, False), (2, True)):  # 2 running reducers fetch 2 MB = the threshold
        core._start(reducers[count - 1], state.hosts[f"r1h{count - 1}"], 1.0)
        assert bool(core.shuffle_notices()) is released
    hinted = policy.ocs_demand(state)
    assert hinted[0][1] == sum(m.partition_for(r) for r in reducers[:2] for m in job.maps) == 2_000_000
    assert hinted[1][0] == 0
    # as fetches complete the hint shrinks, but an elephant pair stays at the threshold until drained
    for m in job.maps:
        for r in reducers[:2]:
            core.shuffle_fetched(r.task_id, 0, [m.task_id])
            left = policy.ocs_demand(state)[0][1]
            assert left == 2_000_000 or (left == 0 and m is job.maps[-1] and r is reducers[1])


def test_jobpacker_sparsity_rule_keeps_shuffle_heavy_ad_hoc_jobs_apart():
    state = cluster(racks=2, hosts=1, slots=3)
    policy = JobPackerPolicy(adhoc_heavy_input_gb=0.001)  # 1 MB input counts as shuffle-heavy
    heavy = [JobSpec(f"h{i}", 0, 2_000_000, 2_000_000, 0, 4, 1, 1, 1) for i in range(2)]
    light = JobSpec("l", 0, 100_000, 1000, 0, 4, 1, 1, 1)
    core = SchedulerCore(policy, state, random.Random(1))
    policy.plan(heavy + [light], state)
    for s in heavy + [light]:
        core.submit(build_job(s, CONTAINER), 0.0)
    for host in state.hosts.values():
        first = policy.next_task(host, state)
        assert first.job_id.startswith("h")  # an idle rack takes a shuffle-heavy job first
        core._start(first, host, 0.0)
        second = policy.next_task(host, state)
        assert second.job_id == "l"  # then only light work beside it


def test_jobpacker_sparsity_rule_never_leaves_a_container_idle():
    state = cluster(racks=1, hosts=1, slots=2)
    policy = JobPackerPolicy(adhoc_heavy_input_gb=0.001)
    heavy = [JobSpec(f"h{i}", 0, 2_000_000, 2_000_000, 0, 1, 1, 1, 1) for i in range(2)]
    core = SchedulerCore(policy, state, random.Random(1))
    policy.plan(heavy, state)
    for s in heavy:
        core.submit(build_job(s, CONTAINER), 0.0)
    host = next(iter(state.hosts.values()))
    core._start(policy.next_task(host, state), host, 0.0)
    second = policy.next_task(host, state)  # no light job waits: the rule's preference yields
    assert second is not None and second.job_id.startswith("h")


def running_per_entry(state: ClusterState) -> Counter:
    """Running tasks per (rack, job, stage)."""
    return Counter((state.rack_of[t.host], t.job_id, t.kind) for h in state.hosts.values() for t in h.running.values())


@pytest.mark.parametrize("policy_class", [JobPackerPolicy, CorralPolicy])
def test_holding_to_the_plan_runs_no_stage_on_more_containers_of_a_rack_than_it_is_booked(policy_class):
    specs = recurring_specs(10, 7)
    widest = {}
    for hold in (False, True):
        state, policy = cluster(slowstart=0.5), policy_class(hold_for_plan=hold)
        widest[hold] = 0  # the most tasks a stage ran on a rack at once beyond its booked containers there

        def watch(state=state, policy=policy, hold=hold):
            for entry, running in running_per_entry(state).items():
                widest[hold] = max(widest[hold], running - policy.offline.widths[entry])

        run_to_completion(policy, specs, state, watch)
    assert widest[True] == 0 and widest[False] > 0  # (without: some stage ran wider than booked)


def planned_spec(job_id: str, maps: int, reduces: int, map_s: float, reduce_s: float) -> JobSpec:
    return JobSpec(
        job_id,
        0.0,
        maps * 1_000_000,
        1_000_000,
        1000,
        maps,
        reduces,
        map_s,
        reduce_s,
        recurring=True,
        predicted=Predicted(0.0, maps * 1_000_000, 1_000_000, 1000),
    )


@pytest.mark.parametrize("policy_class", [JobPackerPolicy, CorralPolicy])
def test_holding_to_the_plan_keeps_the_container_booked_for_an_earlier_reduce_from_a_later_job(policy_class):
    # on one host of 4 containers, a's 3 long maps take 3 from 0 s and its reducer the 4th from 10 s; b's short
    # map is booked after a map, and its 3 reducers after that
    specs = [planned_spec("a", 3, 1, 10.0, 10.0), planned_spec("b", 1, 3, 1.0, 5.0)]
    started = {}
    for hold in (False, True):
        state = cluster(racks=1, hosts=1, slots=4)
        policy = policy_class(hold_for_plan=hold, node_delay_s=0, rack_delay_s=0)
        policy.plan(specs, state)
        assert policy.offline.sequences[0][:2] == [("a", StageKind.MAP), ("a", StageKind.REDUCE)]
        assert policy.offline.widths[(0, "a", StageKind.REDUCE)] == 1
        core = SchedulerCore(policy, state, random.Random(1))
        for spec in specs:
            core.submit(build_job(spec, CONTAINER), 0.0)
        started[hold] = {launch.task.task_id for launch in core.schedule(0.0)}
    assert started[False] == {"a-m0", "a-m1", "a-m2", "b-m0"}  # b's map takes the container a's reducer is booked on
    assert started[True] == {"a-m0", "a-m1", "a-m2"}  # held for a's reducer until slowstart releases it


def test_a_job_planned_on_a_dead_rack_falls_back_to_fair():
    state = cluster(racks=3, hosts=1, slots=2)
    policy = JobPackerPolicy()
    specs = recurring_specs(4, 7)
    policy.plan(specs, state)
    core = SchedulerCore(policy, state, random.Random(1))
    for s in specs:
        core.submit(build_job(s, CONTAINER), 0.0)
    dead = policy.offline.jobs["j0"].maps.racks[0]
    for name, host in state.hosts.items():
        if host.rack == dead:
            core.host_lost(name, 0.0)
    launched = {launch.task.job_id: launch.host for launch in core.schedule(0.0)}
    assert "j0" in launched and state.rack_of[launched["j0"]] != dead


def test_policy_parameters_are_checked():
    with pytest.raises(ValueError, match="sub_batches"):
        JobPackerPolicy(sub_batches=0)
    with pytest.raises(ValueError, match="overprovision"):
        JobPackerPolicy(overprovision=-1)
    with pytest.raises(ValueError, match="patience"):
        CorralPolicy(patience=0)


def test_planning_without_network_rates_is_refused():
    state = ClusterState(2, {"h": HostState("h", 0, 2, Resources(2, 512))}, 1.0)
    with pytest.raises(ValueError, match="network"):
        JobPackerPolicy().plan(recurring_specs(2, 1), state)


def heap_list_schedule(free: list[float], count: int, duration: float, not_before: float) -> list[tuple[float, int]]:
    """The textbook list scheduler: each task on the container that frees first (ties: the lower one)."""
    heap = [(max(t, not_before), k) for k, t in enumerate(free)]
    heapq.heapify(heap)
    taken = []
    for _ in range(count):
        begin, k = heapq.heappop(heap)
        taken.append((begin, k))
        heapq.heappush(heap, (begin + duration, k))
    return taken


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=12),
    st.integers(1, 60),
    st.integers(1, 9),
    st.integers(0, 30),
)
def test_timeline_books_as_a_list_scheduler_does(free, count, duration, not_before):
    timeline = Timeline(1, len(free))
    timeline.free[0] = sorted(free)
    placement = timeline.book("j", StageKind.MAP, (0,), count, float(duration), float(not_before))
    expected = heap_list_schedule(sorted(free), count, duration, not_before)
    assert [(b.start_s, b.container) for b in timeline.bookings] == expected
    assert placement.start_s == expected[0][0] and placement.end_s == max(b for b, _ in expected) + duration
    ends = {k: b + duration for b, k in expected}  # every container's free time after the last task it took
    assert list(timeline.free[0]) == sorted(ends.get(k, t) for k, t in enumerate(sorted(free)))
