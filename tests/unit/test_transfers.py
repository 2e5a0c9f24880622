"""The per-connection rate caps both backends apply, and the workers' disk pacing."""

from __future__ import annotations

import pytest

from hybridbed.scheduler.model import Resources, StageKind
from hybridbed.scheduler.transfers import network_cap_mbps, transfer_cap_mbps
from hybridbed.workers import task as worker_task
from hybridbed.workers.pacing import RATE_LOOK_S, Pacer, Rate

IO_HEAVY = Resources(1, 2000, disk_read_mbps=400, disk_write_mbps=300, net_in_mbps=250)


def test_caps_follow_the_allocation_and_the_scenario_cap():
    assert transfer_cap_mbps(IO_HEAVY, "input", True, None) == 400  # local block: the disk allotment
    assert transfer_cap_mbps(IO_HEAVY, "input", False, None) == 250  # remote: the network allotment
    assert transfer_cap_mbps(IO_HEAVY, "shuffle", False, None) == 250  # the reducer's connections together
    assert transfer_cap_mbps(IO_HEAVY, "write", True, 10) == 300  # a write is no connection
    assert transfer_cap_mbps(IO_HEAVY, "input", False, 10) == 10  # the scenario's cap holds connections
    assert transfer_cap_mbps(IO_HEAVY, "input", True, 10) == 400  # but not a local read
    assert transfer_cap_mbps(Resources(), "shuffle", True, None) is None  # nothing allotted: uncapped
    assert network_cap_mbps(IO_HEAVY, StageKind.REDUCE, None) == 250
    with pytest.raises(ValueError, match="teleport"):
        transfer_cap_mbps(IO_HEAVY, "teleport", True, None)


def test_the_pacer_holds_a_task_to_its_rate_after_a_second_of_burst(monkeypatch):
    clock = {"now": 0.0}
    monkeypatch.setattr(worker_task.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(worker_task.time, "sleep", lambda s: clock.__setitem__("now", clock["now"] + s))
    rate = Rate(8e6)  # 1 MB/s
    pacer = Pacer(rate)
    for _ in range(10):
        pacer.take(1_000_000)
    assert clock["now"] == pytest.approx(9.0)  # 10 MB: one second's burst free, nine seconds paced
    unpaced = Pacer(Rate(None))
    unpaced.take(10**9)
    assert clock["now"] == pytest.approx(9.0)
    clock["now"] += 100.0  # idle (or suspended) for a long while: one second saved up, no more
    for _ in range(5):
        pacer.take(1_000_000)
    assert clock["now"] == pytest.approx(113.0)
    rate.bps = 4e6  # a new share halves it while the task runs
    for _ in range(4):
        pacer.take(1_000_000)
    assert clock["now"] == pytest.approx(121.0)
    connection = Pacer(Rate(8e5), saved_s=0.0)  # a connection's receiving side: nothing saved up, even at first
    connection.take(25_000)
    assert clock["now"] == pytest.approx(121.25)


def test_a_new_share_reaches_the_bytes_a_waiting_take_still_owes(monkeypatch):
    """MR-POTS holds a task at 0.01 of its demand until the set of tasks changes: a 1 MB write booked at 10 KB/s
    owes 100 s, and a share raised a moment later has to apply to the rest of it, as it does in the
    simulator, not after the 100 s. Likewise a share lowered half-way."""
    clock = {"now": 0.0, "changed": 0.0}
    rate = Rate(8e4)  # 10 KB/s

    def sleep_then(at: float, bps: float) -> None:
        def sleep(seconds: float) -> None:
            assert seconds <= RATE_LOOK_S  # the take looks at its rate again at least this often
            clock["now"] += seconds
            if clock["now"] >= at and rate.bps != bps:
                rate.bps, clock["changed"] = bps, clock["now"]

        monkeypatch.setattr(worker_task.time, "sleep", sleep)

    monkeypatch.setattr(worker_task.time, "monotonic", lambda: clock["now"])
    sleep_then(0.5, 8e6)  # raised to 1 MB/s half a second in
    Pacer(rate, saved_s=0.0).take(1_000_000)
    paid = clock["changed"] * 1e4
    assert clock["now"] == pytest.approx(clock["changed"] + (1_000_000 - paid) / 1e6, abs=1e-6)  # about 1.5 s
    start = clock["now"]
    sleep_then(start + 0.5, 8e5)  # lowered to 100 KB/s half-way through a 1 MB take at 1 MB/s
    Pacer(rate, saved_s=0.0).take(1_000_000)
    paid = (clock["changed"] - start) * 1e6
    assert clock["now"] == pytest.approx(clock["changed"] + (1_000_000 - paid) / 1e5, abs=1e-6)  # about 5.5 s on


def test_waiting_compute_does_not_count_a_suspension_as_work(monkeypatch):
    clock = {"now": 0.0, "calls": 0}

    def sleep(seconds: float) -> None:
        clock["calls"] += 1
        clock["now"] += seconds + (5.0 if clock["calls"] == 10 else 0.0)  # frozen for 5 s mid-way

    monkeypatch.setattr(worker_task.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(worker_task.time, "sleep", sleep)
    worker_task.compute(1.0, "sleep")
    assert clock["now"] == pytest.approx(6.0, abs=2 * worker_task.SLEEP_STEP_S)


def test_expected_duration_is_the_slowest_part_at_the_allotted_rates():
    from hybridbed.scheduler.model import JobSpec, build_job
    from hybridbed.scheduler.transfers import expected_duration_s

    spec = JobSpec("j", 0, 2_000_000, 1_000_000, 500_000, 1, 1, 1.0, 0.5)
    demand = Resources(1, 100, disk_read_mbps=8, disk_write_mbps=4, net_in_mbps=2)
    job = build_job(spec, demand)
    assert expected_duration_s(job.maps[0]) == pytest.approx(2.0)  # 2 MB read at 1 MB/s beats 1 s of compute
    # the reducer fetches 1 MB at 0.25 MB/s, then writes 0.5 MB at 0.5 MB/s alongside 0.5 s of compute
    assert expected_duration_s(job.reduces[0]) == pytest.approx(4.0 + 1.0)
    plain = build_job(spec, Resources())
    assert expected_duration_s(plain.maps[0]) == 1.0  # nothing allotted: only the compute counts


def test_waiting_compute_goes_at_the_tasks_share_of_its_cores(monkeypatch):
    clock = {"now": 0.0}
    monkeypatch.setattr(worker_task.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(worker_task.time, "sleep", lambda s: clock.__setitem__("now", clock["now"] + s))
    speed = worker_task.Speed(2.0)
    speed.set_cores(0.5)  # a quarter of the two cores it asked for
    worker_task.compute(1.0, "sleep", speed)
    assert clock["now"] == pytest.approx(4.0, abs=worker_task.SLEEP_STEP_S)
    speed.set_cores(8.0)  # more than it asked for does not make it faster
    assert speed.ratio == 1.0
