"""Scheduler logic without a network: job model, placement, Fair shares and delay scheduling, the core."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from hybridbed.policies.drf import DrfPolicy
from hybridbed.policies.fair import FairPolicy, FairSlotsPolicy
from hybridbed.policies.fifo import FifoPolicy
from hybridbed.scheduler.cluster import ClusterState
from hybridbed.scheduler.core import PolicyError, SchedulerCore
from hybridbed.scheduler.model import JobSpec, Resources, StageKind, TaskState, build_job
from hybridbed.scheduler.placement import choose_replicas
from hybridbed.scheduler.policy import Policy, make_policy, registered_policies
from tests.clusters import grid_cluster

CONTAINER = Resources(1, 256)


def cluster(racks: int = 2, hosts: int = 2, slots: int = 2, slowstart: float = 1.0) -> ClusterState:
    return grid_cluster(racks, hosts, slots, slowstart)


def spec(job_id: str, maps: int = 4, reduces: int = 2, arrival: float = 0.0, shuffle: int = 10_000) -> JobSpec:
    return JobSpec(job_id, arrival, 40_000, shuffle if reduces else 0, 1_000, maps, reduces, 1.0, 1.0)


def submit(core: SchedulerCore, *specs: JobSpec) -> None:
    for s in specs:
        core.submit(build_job(s, CONTAINER), s.arrival_s)


def test_partitions_add_up_to_the_shuffle_and_each_reducer_gets_its_column():
    job = build_job(spec("j", maps=3, reduces=4, shuffle=1_000_003), CONTAINER)
    assert sum(m.written_bytes for m in job.maps) == 1_000_003
    for r in job.reduces:
        assert r.fetch_bytes == sum(m.partition_for(r) for m in job.maps)
    assert sum(m.input_block.size_bytes for m in job.maps) == 40_000


def test_bad_job_specs_are_refused_by_field():
    with pytest.raises(ValueError, match="n_maps"):
        spec("j", maps=0)
    with pytest.raises(ValueError, match="no reducer"):
        JobSpec("j", 0, 10, 10, 0, 1, 0, 1, 1)


@pytest.mark.parametrize("hosts_per_rack", [1, 2, 3])
def test_replicas_are_distinct_hosts_on_two_racks(hosts_per_rack):
    rng = random.Random(3)
    hosts_by_rack = {r: [f"r{r}h{h}" for h in range(hosts_per_rack)] for r in range(4)}
    rack_of = {h: r for r, hs in hosts_by_rack.items() for h in hs}
    for _ in range(200):
        replicas = choose_replicas(hosts_by_rack, rng, 3)
        assert len(set(replicas)) == 3
        racks = Counter(rack_of[h] for h in replicas)
        assert len(racks) >= 2
        if hosts_per_rack >= 2:
            assert sorted(racks.values()) == [1, 2]  # HDFS: one rack holds two of the three


def test_first_replica_goes_where_the_policy_says():
    rng = random.Random(5)
    hosts_by_rack = {r: [f"r{r}h0", f"r{r}h1"] for r in range(4)}
    for _ in range(100):
        assert choose_replicas(hosts_by_rack, rng, 3, first_racks=[2])[0].startswith("r2")


def _replicas(core: SchedulerCore, job_id: str) -> list[tuple[str, ...]]:
    return [task.input_block.replicas for task in core.cluster.jobs[job_id].maps]


@pytest.mark.parametrize("policy", [FairPolicy, FifoPolicy, DrfPolicy])
@pytest.mark.parametrize("rounds", [0, 1, 3])
def test_a_job_arriving_later_is_placed_alike_whatever_the_offer_rounds_before_it(policy, rounds):
    """The same scenario under two policies, or on two backends, makes other offer rounds with other hosts free;
    a job arriving later must still find its blocks where the other setup finds them."""
    alone = SchedulerCore(FifoPolicy(), cluster(racks=4, hosts=3), random.Random(7))
    submit(alone, spec("first", maps=6))
    submit(alone, spec("later", maps=6, arrival=9.0))
    core = SchedulerCore(policy(), cluster(racks=4, hosts=3), random.Random(7))
    submit(core, spec("first", maps=6))
    for now in range(rounds):
        core.schedule(float(now))
    submit(core, spec("later", maps=6, arrival=9.0))
    assert _replicas(core, "first") == _replicas(alone, "first")
    assert _replicas(core, "later") == _replicas(alone, "later")


def test_jobs_placed_before_the_first_offer_round_draw_as_one_stream_for_both_did():
    """A batch's placements and offer order are those of one generator drawn for both, placements first (so a
    batch run gives the results it gave before the offers had a stream of their own)."""
    state = cluster(racks=2, hosts=3)
    core = SchedulerCore(FifoPolicy(), state, random.Random(11))
    submit(core, spec("a", maps=3), spec("b", maps=3))
    one_stream = random.Random(11)
    hosts_by_rack = state.hosts_by_rack()
    for job_id in ("a", "b"):
        assert _replicas(core, job_id) == [choose_replicas(hosts_by_rack, one_stream, 3) for _ in range(3)]
    free = [h for h in state.hosts.values() if h.free_slots > 0]
    one_stream.shuffle(free)
    first_round = core.schedule(0.0)
    assert [launch.host for launch in first_round[: len(free)]] == [h.name for h in free]


def test_fair_gives_every_job_an_equal_share_of_containers():
    state = cluster(racks=2, hosts=2, slots=2)  # 8 containers
    core = SchedulerCore(FairPolicy(node_delay_s=0, rack_delay_s=0), state, random.Random(1))
    submit(core, spec("a", maps=20, arrival=0.0), spec("b", maps=20, arrival=1.0))
    launches = core.schedule(2.0)
    assert len(launches) == 8
    assert Counter(l.task.job_id for l in launches) == {"a": 4, "b": 4}


def test_fair_hands_a_freed_container_to_the_job_furthest_below_its_share():
    state = cluster(racks=1, hosts=1, slots=2)
    core = SchedulerCore(FairPolicy(node_delay_s=0, rack_delay_s=0), state, random.Random(1))
    submit(core, spec("a", maps=6, reduces=0))
    core.schedule(0.0)  # a takes both containers
    submit(core, spec("b", maps=6, reduces=0, arrival=1.0))
    first = next(t for t in state.hosts["r0h0"].running.values())
    core.task_finished(first.task_id, first.attempt, 2.0)
    (launch,) = core.schedule(2.0)
    assert launch.task.job_id == "b"


@pytest.mark.parametrize("policy", [FairPolicy, DrfPolicy])
def test_a_round_of_offers_launches_what_sorting_the_jobs_at_every_offer_launches(policy):
    """Fair sorts the jobs once per round of offers and then moves only the job it launched a task of; the
    same policy without the round (Policy's default) sorts at every offer. Both must choose alike."""

    def launches(policy_class: type[FairPolicy]) -> list[tuple[str, str]]:
        state = cluster(racks=3, hosts=4, slots=3)
        core = SchedulerCore(policy_class(), state, random.Random(7))
        rng = random.Random(3)
        jobs = [
            spec(f"j{i}", maps=rng.randint(1, 12), reduces=rng.randint(0, 3), arrival=rng.choice([0.0, 0.5]))
            for i in range(40)
        ]
        submit(core, *jobs)
        launched = []
        for step in range(40):
            now = 1.0 + 0.5 * step  # the locality waits (1 s each) run out along the way
            launched += [(launch.task.task_id, launch.host) for launch in core.schedule(now)]
            running = sorted(t.task_id for h in state.hosts.values() for t in h.running.values())
            for task_id in rng.sample(running, k=min(len(running), 4)):
                core.task_finished(task_id, core.tasks[task_id].attempt, now)
        return launched

    sorting_at_every_offer = type("SortingAtEveryOffer", (policy,), {"offer_round": Policy.offer_round})
    expected = launches(sorting_at_every_offer)
    assert len(expected) > 150
    assert launches(policy) == expected


def test_a_job_passed_over_for_locality_is_asked_again_once_its_node_local_map_started():
    """Within a round Fair passes over a job that can start only node-local maps at hosts holding none of
    its blocks. Once its one map has started on the block's host, the job has no map left, and without
    precedence its reduce is released: the next host offered must get that reduce, not pass the job over."""
    state = cluster(racks=1, hosts=3, slots=1)
    state.precedence = False
    core = SchedulerCore(FairPolicy(node_delay_s=1.0, rack_delay_s=1.0), state, random.Random(1), replicas=1)
    core.submit(build_job(spec("j", maps=1, reduces=1), CONTAINER), 0.0)
    block_host = core.cluster.jobs["j"].maps[0].input_block.replicas[0]
    others = sorted(h for h in state.hosts if h != block_host)
    launches = core.schedule(0.0, hosts=[others[0], block_host, others[1]])
    assert [(launch.task.kind, launch.host) for launch in launches] == [
        (StageKind.MAP, block_host),
        (StageKind.REDUCE, others[1]),
    ]


@pytest.mark.parametrize(
    ("policy", "container", "per_host"),
    [
        (FairPolicy, Resources(2, 256), 1),  # cores are allocated: one 2-core task per 2-core host
        (FairSlotsPolicy, Resources(2, 256), 2),  # slots mode: the cores are over-committed
        (FairSlotsPolicy, Resources(1, 512), 1),  # ... but never the memory
    ],
)
def test_fair_slots_mode_over_commits_cores_but_never_memory_or_containers(policy, container, per_host):
    state = cluster(racks=1, hosts=2, slots=2)  # hosts of 2 containers, 2 cores, 512 MB
    core = SchedulerCore(policy(node_delay_s=0, rack_delay_s=0), state, random.Random(1))
    job = spec("a", maps=8, reduces=0)
    core.submit(build_job(job, container), 0.0)
    launches = core.schedule(0.0)
    assert Counter(launch.host for launch in launches) == {"r0h0": per_host, "r0h1": per_host}


def test_fifo_serves_the_oldest_job_first():
    state = cluster(racks=2, hosts=2, slots=2)
    core = SchedulerCore(FifoPolicy(), state, random.Random(1))
    submit(core, spec("late", maps=20, arrival=5.0), spec("early", maps=20, arrival=0.0))
    assert {l.task.job_id for l in core.schedule(6.0)} == {"early"}


def _single_remote_map_cluster():
    """One job with one map whose replicas all sit on rack 1; rack 0's host asks for work."""
    state = cluster(racks=2, hosts=2, slots=1)
    state.hosts = {n: h for n, h in state.hosts.items()}
    core = SchedulerCore(FairPolicy(node_delay_s=2.0, rack_delay_s=3.0), state, random.Random(1), replicas=1)
    job = build_job(spec("j", maps=1, reduces=0), CONTAINER)
    core.policy.input_racks = lambda job, cluster: [1]
    core.submit(job, 0.0)
    return state, core, job


def test_delay_scheduling_waits_for_locality_then_relaxes_it():
    state, core, job = _single_remote_map_cluster()
    policy = core.policy
    replica = job.maps[0].input_block.replicas[0]
    local_host = state.hosts[replica]
    same_rack = next(h for n, h in state.hosts.items() if h.rack == local_host.rack and n != replica)
    other_rack = next(h for h in state.hosts.values() if h.rack != local_host.rack)

    state.now = 0.0
    assert policy.next_task(other_rack, state) is None  # off-rack: wait
    state.now = 1.9
    assert policy.next_task(same_rack, state) is None  # rack-local, but the node delay is not over
    state.now = 2.0
    assert policy.next_task(same_rack, state) is job.maps[0]
    assert policy.next_task(other_rack, state) is None  # off-rack needs node + rack delay
    state.now = 5.0
    assert policy.next_task(other_rack, state) is job.maps[0]
    assert policy.next_task(local_host, state) is job.maps[0]  # node-local is always fine


def test_slowstart_holds_reduces_until_enough_maps_are_done():
    state = cluster(racks=1, hosts=2, slots=4, slowstart=0.5)
    core = SchedulerCore(FifoPolicy(), state, random.Random(1))
    submit(core, spec("j", maps=4, reduces=2))
    launches = core.schedule(0.0)
    assert {l.task.kind for l in launches} == {StageKind.MAP}
    maps = [l.task for l in launches]
    core.task_finished(maps[0].task_id, 0, 1.0)
    assert all(l.task.kind is StageKind.MAP for l in core.schedule(1.0))
    core.task_finished(maps[1].task_id, 0, 2.0)
    assert [l.task.kind for l in core.schedule(2.0)] == [StageKind.REDUCE, StageKind.REDUCE]


def test_a_lost_host_requeues_its_running_tasks_and_the_map_outputs_it_held():
    state = cluster(racks=2, hosts=1, slots=2, slowstart=1.0)
    core = SchedulerCore(FifoPolicy(), state, random.Random(1))
    submit(core, spec("j", maps=4, reduces=1))
    maps = [l.task for l in core.schedule(0.0)]
    on_r0 = [m for m in maps if m.host == "r0h0"]
    assert on_r0 and len(on_r0) < 4
    for m in maps:
        core.task_finished(m.task_id, 0, 1.0)
    (reduce_launch,) = core.schedule(1.0)
    assert [len(n.sources) for n in core.shuffle_notices()] == [4]  # one notice for the reducer, of every map
    victim = "r0h0" if reduce_launch.host != "r0h0" else "r1h0"
    requeued = core.host_lost(victim, 2.0)
    lost_maps = [m for m in maps if m.host is None]
    assert {t.task_id for t in requeued} >= {m.task_id for m in lost_maps}
    assert all(m.state is TaskState.PENDING and m.attempt == 1 for m in lost_maps)
    notices = []
    while any(m.state is not TaskState.DONE for m in maps):
        relaunched = core.schedule(2.0)
        assert relaunched and all(l.host != victim for l in relaunched)
        for l in relaunched:
            core.task_finished(l.task.task_id, l.task.attempt, 3.0)
        notices += core.shuffle_notices()
    assert {s.task_id for n in notices for s in n.sources} == {m.task_id for m in lost_maps}  # new locations only


def test_a_parent_that_finished_twice_between_notices_is_told_once_at_its_new_place():
    """A map that finished, lost its output with its host and finished again elsewhere before the consumers
    were next told: the running reducer is told of it once, at the attempt that holds its output."""
    state = cluster(racks=2, hosts=1, slots=2, slowstart=0.5)
    core = SchedulerCore(FifoPolicy(), state, random.Random(1))
    submit(core, spec("j", maps=2, reduces=1))
    first, second = (l.task for l in core.schedule(0.0))
    core.task_finished(first.task_id, 0, 1.0)
    (reduce_launch,) = core.schedule(1.0)  # released by the first map (slowstart 0.5)
    assert [[s.task_id for s in n.sources] for n in core.shuffle_notices()] == [[first.task_id]]
    core.task_finished(second.task_id, 0, 2.0)
    assert second.host != reduce_launch.host
    core.host_lost(second.host, 2.5)
    assert second.attempt == 1
    for launch in core.schedule(3.0):
        core.task_finished(launch.task.task_id, launch.task.attempt, 4.0)
    told = [(n.consumer.task_id, s.task_id, s.host) for n in core.shuffle_notices() for s in n.sources]
    assert told == [(reduce_launch.task.task_id, second.task_id, second.host)]
    assert core.shuffle_notices() == []


def test_stale_attempt_reports_are_ignored():
    state = cluster(racks=2, hosts=1, slots=1)
    core = SchedulerCore(FifoPolicy(), state, random.Random(1))
    submit(core, spec("j", maps=1, reduces=0))
    (launch,) = core.schedule(0.0)
    core.host_lost(launch.host, 1.0)
    assert core.task_finished(launch.task.task_id, 0, 1.5) is None
    assert launch.task.state is TaskState.PENDING


def test_a_policy_that_breaks_the_rules_is_stopped():
    class Greedy(Policy):
        name = "greedy"
        summary = "returns a reduce before slowstart"

        def next_task(self, host, cluster):
            return next(iter(cluster.jobs.values())).reduces[0]

    state = cluster(slowstart=1.0)
    core = SchedulerCore(Greedy(), state, random.Random(1))
    submit(core, spec("j"))
    with pytest.raises(PolicyError, match="before its parent stages released it"):
        core.schedule(0.0)


def test_policies_are_registered_by_name():
    assert {"fair", "fifo"} <= set(registered_policies())
    assert isinstance(make_policy("fair", {"node_delay_s": 0.5}), FairPolicy)
    with pytest.raises(KeyError, match="unknown policy"):
        make_policy("nope")
    with pytest.raises(ValueError, match="fair"):
        make_policy("fair", {"colour": 1})
