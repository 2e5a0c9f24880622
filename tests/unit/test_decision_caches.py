"""What packing and host-pool policies keep between decisions goes stale exactly when the cluster changes:
stage offers, changed hosts, MR-POTS's DRP candidates."""

from __future__ import annotations

import random

from hybridbed.policies.mrpots import MrPotsPolicy
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.model import JobSpec, Resources, build_job
from hybridbed.scheduler.policy import make_policy

CAPACITY = Resources(4, 4096, disk_read_mbps=100, disk_write_mbps=100, net_in_mbps=100, net_out_mbps=100)


def small_cluster(policy_name: str = "tetris", slowstart: float = 1.0) -> tuple[SchedulerCore, ClusterState]:
    hosts = {f"r{r}h{h}": HostState(f"r{r}h{h}", r, 2, CAPACITY) for r in range(2) for h in range(2)}
    cluster = ClusterState(2, hosts, slowstart=slowstart)
    return SchedulerCore(make_policy(policy_name), cluster, random.Random(1), replicas=1), cluster


def submit(core: SchedulerCore, job_id: str, maps: int = 2, reduces: int = 1) -> None:
    reading = Resources(1, 256, disk_read_mbps=50)  # a map reads its block at 50 Mb/s
    spec = JobSpec(job_id, 0.0, maps * 64_000_000, 10_000_000, 0, maps, reduces, 1.0, 1.0, map_demand=reading)
    core.submit(build_job(spec, Resources(1, 256)), 0.0)


def test_stage_offers_follow_launches_and_releases():
    core, cluster = small_cluster()
    submit(core, "j", maps=2, reduces=1)
    job = cluster.jobs["j"]
    assert [o.stage for o in cluster.stage_offers(job)] == [0]  # the reduce waits for every map
    for launch in core.schedule(0.0):
        core.task_finished(launch.task.task_id, launch.task.attempt, 1.0)
    assert [o.stage for o in cluster.stage_offers(job)] == [1]  # maps all done and none pending
    offer = cluster.stage_offers(job)[0]
    assert offer.finished == 0 and offer.tasks == 1 and offer.by_host is None


def test_stage_offers_take_back_a_release_when_a_finished_maps_output_is_lost():
    """A lost host's finished map runs again: its stage is offered again, and the reduce it released is not."""
    core, cluster = small_cluster()
    submit(core, "j", maps=2, reduces=1)
    job = cluster.jobs["j"]
    launches = core.schedule(0.0)
    for launch in launches:
        core.task_finished(launch.task.task_id, launch.task.attempt, 1.0)
    assert [o.stage for o in cluster.stage_offers(job)] == [1]
    core.host_lost(launches[0].host, 2.0)
    [offer] = cluster.stage_offers(job)
    assert (offer.stage, offer.finished, offer.pending) == (0, 1, 1)


def test_a_stage_offer_places_a_map_where_its_block_is():
    core, cluster = small_cluster()
    submit(core, "j", maps=1, reduces=1)
    job = cluster.jobs["j"]
    (holder,) = job.maps[0].input_block.replicas
    offer = cluster.stage_offers(job)[0]
    elsewhere = next(name for name in cluster.hosts if name != holder)
    local, remote_there = offer.placed(holder)
    remote, remote_elsewhere = offer.placed(elsewhere)
    assert not remote_there and remote_elsewhere
    assert local.net_in_mbps == 0 and local.disk_read_mbps > 0  # read from its own disk
    assert remote.disk_read_mbps == 0 and remote.net_in_mbps > 0  # received over the network


def test_hosts_alike_share_one_capacity_object():
    _, cluster = small_cluster()
    capacities = {id(h.capacity) for h in cluster.hosts.values()}
    assert len(capacities) == 1


def test_changed_hosts_are_those_started_on_resized_or_lost():
    core, cluster = small_cluster()
    assert cluster.take_changed_hosts() == set(cluster.hosts)  # at first, every host
    assert cluster.take_changed_hosts() == set()
    submit(core, "j", maps=1, reduces=1)
    (launch,) = core.schedule(0.0)
    source = cluster.read_source(launch.task, launch.host)  # a remote read holds bandwidth where the block is
    started_on = {launch.host} | ({source} if source else set())
    assert cluster.take_changed_hosts() == started_on
    cluster.hosts["r1h1"].resize(3)
    cluster.lose_host("r1h0")
    assert cluster.take_changed_hosts() == {"r1h1", "r1h0"}


def test_mrpots_offers_a_stage_again_once_its_parents_released_it():
    core, cluster = small_cluster("mrpots")
    assert isinstance(core.policy, MrPotsPolicy)
    submit(core, "j", maps=2, reduces=1)
    capacity = cluster.hosts["r0h0"].capacity
    before = {c.key: c.eligible for c in core.policy._candidates(cluster, capacity)}
    assert before == {("j", 0): True, ("j", 1): False}  # the reduce waits for its maps
    core.act(0.0)
    for launch in core.schedule(0.0):
        core.task_finished(launch.task.task_id, launch.task.attempt, 1.0)
    after = {c.key: c.eligible for c in core.policy._candidates(cluster, capacity)}
    assert after == {("j", 1): True}
