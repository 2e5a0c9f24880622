"""The flow-level simulator: paths and circuits, reproducibility, and that every byte of a workload moves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hybridbed.config.addressing import FabricPlan
from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.controller.events import circuit_pairs
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.experiments.simulated import run_simulation
from hybridbed.results.path_accounting import uplink_bytes
from hybridbed.results.phases import circuit_endings
from hybridbed.scheduler.model import JobSpec, Resources, build_job
from hybridbed.simulator.engine import CLOCK_TICKS_PER_S, next_tick
from hybridbed.simulator.fabric import FabricLinks, SimulatedOcs
from hybridbed.simulator.fairshare import max_min_rates, progressive_filling_rates
from hybridbed.simulator.flows import Flow, FlowTable
from hybridbed.workloads.build import build_workload

REPO = Path(__file__).resolve().parents[2]
MB = 1e6 / 8  # bytes per second in one Mb/s


def match_on(ocs: SimulatedOcs, now: float, demand: list[list[float]]) -> tuple[list[tuple[int, int]], float | None]:
    """One periodic reconfiguration: the scheduler's configuration for this demand, set up now."""
    (slot,) = ocs.schedule(demand)
    return ocs.reconfigure(now, slot.configuration)


def two_rack_network(delay_ms: float) -> tuple[FlowTable, SimulatedOcs, Flow]:
    fabric = FabricSpec(racks=2, hosts_per_rack=1, host_rate_mbps=100, eps_rate_mbps=10, ocs_rate_mbps=50)
    links = FabricLinks(fabric, {"r0h0": 0, "r1h0": 1})
    ocs = SimulatedOcs(fabric, OcsSpec(mode="periodic", reconfig_delay_ms=delay_ms, elephant_threshold_bytes=1000))
    table = FlowTable(links)
    task = build_job(JobSpec("j", 0, 1, 0, 0, 1, 0, 1, 1), Resources()).maps[0]
    flow = Flow("input", task, 0, None, "r0h0", "r1h0", int(100 * MB), 0.0)
    table.add(flow, np.inf, None)
    table.settle()
    return table, ocs, flow


@pytest.mark.parametrize("skip_unchanged", [True, False])
def test_an_unchanged_matching_stays_lit_unless_the_ocs_reconfigures_every_interval(skip_unchanged):
    fabric = FabricSpec(racks=2, hosts_per_rack=1)
    spec = OcsSpec(mode="periodic", reconfig_delay_ms=100, elephant_threshold_bytes=1000, skip_unchanged=skip_unchanged)
    ocs = SimulatedOcs(fabric, spec)
    demand = [[0, 5000], [0, 0]]
    match_on(ocs, 0.0, demand)
    ocs.light()
    left, lit_at = match_on(ocs, 1.0, demand)
    if skip_unchanged:
        assert (left, lit_at) == ([], None) and len(ocs.events) == 1
    else:  # dark again for the delay: the pair goes back to the EPS and its circuit lights anew
        assert left == [(0, 1)] and lit_at == pytest.approx(1.1) and len(ocs.events) == 2
        assert ocs.lit == {} and ocs.light() == [(0, 1)]


def test_a_flow_between_racks_takes_the_eps_until_its_circuit_is_lit_after_exactly_the_delay():
    table, ocs, flow = two_rack_network(delay_ms=250)
    assert table.rate[0] == pytest.approx(10 * MB)  # the EPS uplink is the bottleneck
    table.advance(1.0)
    left, lit_at = match_on(ocs, 1.0, [[0, 5000], [0, 0]])
    assert left == [] and lit_at == pytest.approx(1.25)
    table.settle()
    assert table.rate[0] == pytest.approx(10 * MB)  # dark: still on the EPS
    table.advance(0.25)
    for a, b in ocs.light():
        table.reroute(a, b, ocs.lit[(a, b)])
    table.settle()
    assert table.rate[0] == pytest.approx(50 * MB)  # now the circuit
    remaining = 100 * MB - 1.25 * 10 * MB
    assert table.time_to_next_finish() == pytest.approx(remaining / (50 * MB))
    table.advance(table.time_to_next_finish())
    assert table.pop_finished(3.0) == [flow]
    assert table.ocs_uplink_bytes == pytest.approx(remaining)
    assert table.eps_uplink_bytes == pytest.approx(1.25 * 10 * MB)
    event = ocs.events[0]
    assert event.dark_until - event.dark_from == pytest.approx(0.25)


def test_demand_below_the_threshold_lights_nothing_and_a_removed_circuit_sends_its_pair_back_at_once():
    table, ocs, _ = two_rack_network(delay_ms=10)
    assert match_on(ocs, 1.0, [[0, 999], [0, 0]]) == ([], None)
    match_on(ocs, 2.0, [[0, 5000], [0, 0]])
    ocs.light()
    left, lit_at = match_on(ocs, 3.0, [[0, 0], [0, 0]])
    assert left == [(0, 1)] and lit_at == 3.0 and not ocs.lit


def simulate(tmp_path: Path, policy: str, name: str, **overrides) -> Path:
    scenario = load_scenario(
        REPO / "scenarios" / "quickstart.yaml", {"backend": "simulation", "scheduler.policy": policy, **overrides}
    )
    out = tmp_path / name
    run_simulation(scenario, out)
    return out


def test_reducers_released_by_a_map_are_offered_every_free_host_as_the_emulated_scheduler_offers_them(tmp_path):
    # one map, then 8 reducers on 8 idle hosts of 2 containers: the emulated scheduler offers every free host
    # round by round (one task a host a round), so they start together, one a host. Offering only the host
    # the map freed put two on it and left six for the next heartbeat.
    trace = tmp_path / "job.tsv"
    trace.write_text("job0\t0\t0\t1000000\t8000000\t1000000\n")  # bytes: 1 MB in, 8 MB shuffled
    out = simulate(
        tmp_path,
        "fair",
        "fair",
        **{
            "scale": 1.0,
            "workload.source": "swim",
            "workload.trace": str(trace),
            "workload.jobs": 1,
            "workload.shape.block_mb": 1,
            "workload.shape.reduce_input_mb": 1,
        },
    )
    tasks = pd.read_csv(out / "tasks.csv")
    (map_end,) = tasks[tasks.kind == "map"].finish_s
    reducers = tasks[tasks.kind == "reduce"]
    assert len(reducers) == 8 and reducers.host.nunique() == 8
    assert reducers.start_s.tolist() == pytest.approx([map_end] * 8)


def test_backlog_demand_lights_circuits_for_aggregates_too_slow_to_cross_the_threshold_in_one_interval(tmp_path):
    # 400 kB after scaling: more than a 2 Mb/s EPS uplink moves in a 1 s interval, so measured demand of
    # one interval never reaches it; summed over the intervals a pair keeps sending, it does
    runs = {
        mode: json.loads(
            (
                simulate(
                    tmp_path,
                    "fair",
                    mode,
                    **{
                        "ocs.demand_source": "measured",
                        "ocs.elephant_threshold_bytes": 400e6,
                        "ocs.measured_demand": mode,
                    },
                )
                / "summary.json"
            ).read_text()
        )
        for mode in ("interval", "backlog")
    }
    assert runs["interval"]["reconfigurations"] == 0 and runs["interval"]["ocs_uplink_bytes"] == 0
    assert runs["backlog"]["reconfigurations"] > 0 and runs["backlog"]["ocs_uplink_bytes"] > 0


def test_only_flows_that_may_ride_a_circuit_count_as_measured_demand():
    table, _, flow = two_rack_network(delay_ms=10)  # one steerable flow 0 -> 1 at 10 Mb/s
    mouse = Flow("input", flow.task, 0, None, "r0h0", "r1h0", int(100 * MB), 0.0)
    table.add(mouse, np.inf, None, steerable=False)
    table.settle()
    table.advance(1.0)
    assert table.take_pair_bytes() == [[0.0, pytest.approx(5 * MB)], [0.0, 0.0]]  # half the EPS uplink each
    assert table.eps_uplink_bytes == pytest.approx(10 * MB)  # both crossed it


def test_measured_demand_is_read_in_whole_bytes_and_no_byte_is_lost_between_readings():
    table, _, _ = two_rack_network(delay_ms=10)  # one flow 0 -> 1 over the 10 Mb/s EPS: 1.25e6 bytes/s
    readings = []
    for _ in range(8):
        table.advance(0.5**20)  # 1.192... bytes each time (exact in binary)
        readings.append(table.take_pair_bytes()[0][1])
    assert readings == [1, 1, 1, 1, 1, 2, 1, 1]  # the counter's whole bytes: 9 of the 9.54 sent


@pytest.mark.parametrize("policy", ["fair", "jobpacker"])
def test_every_byte_of_the_workload_moves_and_every_job_finishes(tmp_path, policy):
    out = simulate(tmp_path, policy, policy)
    summary = json.loads((out / "summary.json").read_text())
    jobs, tasks, flows = (pd.read_csv(out / f) for f in ("jobs.csv", "tasks.csv", "flows.csv"))
    assert summary["status"] == "done" and len(jobs) == summary["jobs_total"] == 12
    shuffle = flows[flows.kind == "shuffle"]
    assert shuffle.bytes.sum() == jobs.shuffle_bytes.sum()
    assert tasks.fetched_bytes.sum() == jobs.shuffle_bytes.sum()
    assert flows[flows.kind == "input"].bytes.sum() == tasks.read_remote_bytes.sum()
    assert (tasks.read_local_bytes + tasks.read_remote_bytes).sum() == jobs.input_bytes.sum()
    assert set(flows.path) <= {"rack", "eps", "ocs", "mixed"}
    # each column holds what its header says (the simulator writes a flow's row as values in the header's order)
    rack_of = {host.name: host.rack for host in FabricPlan(load_scenario(out / "scenario.json").fabric).hosts()}
    assert (flows.src_host.map(rack_of) == flows.src_rack).all() and (
        flows.dst_host.map(rack_of) == flows.dst_rack
    ).all()
    assert set(flows.task_id) <= set(tasks.task_id) and set(flows.job_id) <= set(jobs.job_id)
    assert (flows.start_s <= flows.end_s).all() and set(flows.elephant) <= {0, 1}
    assert ((flows.ocs_bytes >= 0) & (flows.ocs_bytes <= flows.bytes)).all()
    cross = flows[flows.src_rack != flows.dst_rack]
    uplinks = summary["eps_uplink_bytes"] + summary["ocs_uplink_bytes"]
    assert uplinks == pytest.approx(cross.bytes.sum(), rel=0.01)  # finished flows may end up to 0.5 % early
    events = pd.read_csv(out / "ocs_events.csv")
    assert len(events) == summary["reconfigurations"] > 0

    # every circuit a reconfiguration took down was decided on a logged demand: its pair's row says why
    taken_down = sum(
        len(circuit_pairs(json.loads(e.circuits_before)) - circuit_pairs(json.loads(e.circuits_after)))
        for e in events.itertuples()
    )
    assert len(circuit_endings(events, pd.read_csv(out / "ocs_demand.csv"))) == taken_down > 0
    links = pd.read_csv(out / "links.csv")  # the ToR core port counters, as the emulation samples them
    assert set(links.link) == {f"tor{r}-{kind}" for r in range(4) for kind in ("eps", "ocs0")}
    eps, ocs = uplink_bytes(links)
    assert eps == pytest.approx(summary["eps_uplink_bytes"], abs=4) and ocs == pytest.approx(
        summary["ocs_uplink_bytes"], abs=4
    )
    last = links[links.time_s == links.time_s.max()]
    assert last.tx_bytes.sum() == pytest.approx(last.rx_bytes.sum(), abs=8)  # what goes up a core link comes down one
    assert links.time_s.max() == pytest.approx(summary["simulated_s"], abs=1e-3)


def test_f_eps_has_no_circuits(tmp_path):
    out = simulate(tmp_path, "fair", "f-eps", **{"fabric.variant": "f-eps"})
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ocs_uplink_bytes"] == 0 and summary["reconfigurations"] == 0
    assert set(pd.read_csv(out / "flows.csv").path) <= {"rack", "eps"}


@pytest.mark.parametrize(
    ("scenario", "policy", "overrides"),
    [
        ("quickstart.yaml", "jobpacker", {}),
        # the paper's OCS model (ocs.elephants_wait): Fair's reducers pass over rack pairs without a circuit
        ("jobpacker-paper-sim-coarse.yaml", "fair", {"workload.jobs": 100}),
    ],
    ids=["quickstart", "elephants-wait"],
)
def test_the_same_seed_gives_byte_identical_results_in_fresh_processes(tmp_path, scenario, policy, overrides):
    """Each process hashes strings with its own seed, so a set of task names iterates in another order in
    another process: nothing a run's results depend on may iterate one."""
    path = REPO / "scenarios" / scenario
    overrides = {"backend": "simulation", "scheduler.policy": policy, **overrides}
    code = (
        "import json, sys; from pathlib import Path; from hybridbed.experiments.scenarios import load_scenario; "
        "from hybridbed.experiments.simulated import run_simulation; "
        "run_simulation(load_scenario(Path(sys.argv[1]), json.loads(sys.argv[3])), Path(sys.argv[2]))"
    )
    for run, hash_seed in (("a", "1"), ("b", "2")):
        subprocess.run(
            [sys.executable, "-c", code, str(path), str(tmp_path / run), json.dumps(overrides)],
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
    written = sorted(path.name for path in (tmp_path / "a").glob("*.csv"))
    assert {"jobs.csv", "tasks.csv", "flows.csv", "ocs_events.csv"} <= set(written)
    for name in written:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    other = tmp_path / "other-seed"
    run_simulation(load_scenario(path, {**overrides, "seed": 8}), other)
    assert (other / "flows.csv").read_bytes() != (tmp_path / "a" / "flows.csv").read_bytes()


@pytest.mark.parametrize("exact_end", [72.9540563, 0.5e-6, 3599.9999991, 1 / 3])
def test_a_flow_ends_on_the_clocks_next_tick_whatever_the_last_bits_of_its_end(exact_end):
    tick = next_tick(exact_end)
    assert 0 <= tick - exact_end < 1 / CLOCK_TICKS_PER_S
    assert next_tick(exact_end * (1 - 1e-15)) == tick == next_tick(exact_end * (1 + 1e-15))
    assert next_tick(tick) == tick


@pytest.mark.parametrize(
    ("jobs", "rates"),
    [
        # without the clock's ticks, 17 of the 150 JCTs differed, by up to 9 s
        (150, progressive_filling_rates),
        # without whole-byte demand, the two picked other circuits among equal demands at 88 s: 21 JCTs differed
        (400, max_min_rates),
    ],
    ids=["reference", "bottleneck-first"],
)
def test_another_exact_rate_computation_gives_the_same_run_byte_for_byte(tmp_path, jobs, rates):
    """The relaxed computation and the others differ in the last bits of their rates; with flows ending on the
    clock's ticks and demand read in whole bytes, no decision turns on those (Fair, the coarse batch's first
    jobs)."""
    overrides = {"backend": "simulation", "scheduler.policy": "fair", "workload.jobs": jobs}
    scenario = load_scenario(REPO / "scenarios" / "jobpacker-paper-sim-coarse.yaml", overrides)
    run_simulation(scenario, tmp_path / "relaxed")
    run_simulation(scenario, tmp_path / "other", rates=rates)
    for name in ("jobs.csv", "tasks.csv", "flows.csv", "ocs_events.csv"):
        assert (tmp_path / "relaxed" / name).read_bytes() == (tmp_path / "other" / name).read_bytes(), name


def test_disks_are_shared_links_and_a_map_streams_its_read_compute_and_write():
    """Two I/O-heavy maps on one host, each allotted half the disk but DRF-style over-allocated with a
    third: the three share the disk, and each map ends when its read, compute and write are all done."""
    fabric = FabricSpec(racks=2, hosts_per_rack=1, host_rate_mbps=100, eps_rate_mbps=10, ocs_rate_mbps=50)
    links = FabricLinks(fabric, {"r0h0": 0, "r1h0": 1}, disk_read_mbps=80, disk_write_mbps=80)
    assert links.models_disk and links.path_links == 6  # 4 network links, the task's link, the disk
    table = FlowTable(links)
    demand = Resources(1, 100, disk_read_mbps=40, disk_write_mbps=40)
    task = build_job(JobSpec("j", 0, 1, 0, 0, 1, 0, 1, 1), demand).maps[0]
    for _ in range(3):  # three local reads, each capped at its 40 Mb/s allotment, on an 80 Mb/s disk
        table.add(Flow("input", task, 0, None, "r0h0", "r0h0", int(80 * MB), 0.0), 40 * MB, None)
    table.add(Flow("write", task, 0, None, "r0h0", "r0h0", int(80 * MB), 0.0), 40 * MB, None)
    table.settle()
    assert table.rate[:3] == pytest.approx([80 / 3 * MB] * 3)  # the disk, not the allotment, limits them
    assert table.rate[3] == pytest.approx(40 * MB)  # writes use the other direction


def test_a_streaming_map_takes_the_longest_of_its_read_and_its_compute(tmp_path):
    scenario = load_scenario(REPO / "scenarios" / "tetris-paper-sim.yaml", {"workload.jobs": 4})
    out = tmp_path / "tetris"
    run_simulation(scenario, out)
    tasks = pd.read_csv(out / "tasks.csv")
    maps = tasks[tasks.kind == "map"]
    jobs = {s.job_id: s for s in build_workload(scenario)}
    overlapped = 0
    for row in maps.itertuples():
        spec = jobs[row.job_id]
        duration = row.finish_s - row.start_s
        read_alone = spec.input_bytes / spec.n_maps / (spec.map_demand.disk_read_mbps * MB)
        write_alone = (spec.shuffle_bytes / spec.n_maps) / (spec.map_demand.disk_write_mbps * MB)
        assert duration >= max(spec.map_compute_s, read_alone, write_alone) - 2e-3
        overlapped += duration < spec.map_compute_s + read_alone + write_alone - 2e-3
    assert overlapped > len(maps) / 2  # most maps ran their parts together, not one after another


def test_a_policy_error_fails_the_run_and_keeps_what_was_written(tmp_path, monkeypatch):
    from hybridbed.experiments.run_failed import RunFailed
    from hybridbed.policies.fifo import FifoPolicy

    def choose_a_running_task(self, host, cluster):
        running = [t for h in cluster.hosts.values() for t in h.running.values()]
        return running[0] if running else next(iter(cluster.pending[next(iter(cluster.launchable))].maps.values()))

    monkeypatch.setattr(FifoPolicy, "next_task", choose_a_running_task)
    with pytest.raises(RunFailed, match="policy fifo chose"):
        simulate(tmp_path, "fifo", "bad")
    summary = json.loads((tmp_path / "bad" / "summary.json").read_text())
    assert summary["status"] == "failed" and (tmp_path / "bad" / "tasks.csv").exists()
    assert "policy fifo chose" in summary["error"]


@pytest.mark.parametrize("stopped", [False, True])
def test_an_error_after_a_stop_signal_marks_the_run_interrupted_and_any_other_error_says_what_failed(
    tmp_path, monkeypatch, stopped
):
    from hybridbed.policies.fifo import FifoPolicy
    from hybridbed.testbed import interrupts

    monkeypatch.setattr(interrupts, "_stop_asked", False)

    def next_task_cut_short(self, host, cluster):
        if stopped:  # a library that swallows the KeyboardInterrupt and fails in its own way (numba compiling)
            with pytest.raises(KeyboardInterrupt):
                interrupts.stop(signal.SIGUSR1, None)
        raise RuntimeError("no compiled object yet")

    monkeypatch.setattr(FifoPolicy, "next_task", next_task_cut_short)
    with pytest.raises(KeyboardInterrupt if stopped else RuntimeError):
        simulate(tmp_path, "fifo", "cut")
    summary = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert summary["status"] == ("interrupted" if stopped else "failed")
    assert summary.get("error") == (None if stopped else "RuntimeError: no compiled object yet")


@pytest.mark.parametrize("policy", ["fair", "fair-slots"])
def test_tasks_over_committing_a_host_share_its_cores_and_compute_slower(tmp_path, monkeypatch, policy):
    """Maps of 2 cores and 10 s on hosts of 2 cores and 2 slots: Fair runs one at a time per host, each in
    10 s; Fair's slots mode runs two, and while two overlap each gets one core (half its demand), so a map
    that overlapped another for o seconds takes 10 + o/2 s."""
    job = JobSpec("j", 0.0, 16, 0, 0, 16, 0, 10.0, 1.0)
    monkeypatch.setattr("hybridbed.experiments.simulated.build_workload", lambda scenario: [job])
    out = simulate(tmp_path, policy, policy, **{"workers.container.cores": 2})
    maps = pd.read_csv(out / "tasks.csv")
    assert len(maps) == 16
    overlaps = []
    for row in maps.itertuples():
        others = maps[(maps.host == row.host) & (maps.task_id != row.task_id)]
        overlap = (np.minimum(others.finish_s, row.finish_s) - np.maximum(others.start_s, row.start_s)).clip(0).sum()
        overlaps.append(overlap)
        assert row.finish_s - row.start_s == pytest.approx(10.0 + overlap / 2, abs=1e-6)
    assert (max(overlaps) > 0) == (policy == "fair-slots")


def test_the_resource_tracker_reads_each_hosts_nic_and_disk_use_off_the_flows():
    table, _, _ = two_rack_network(delay_ms=0)  # one flow r0h0 -> r1h0 at the 10 Mb/s EPS uplink
    usage = table.link_loads()[table.links.host_usage_links()] / MB  # hosts x (disk read, write, in, out)
    np.testing.assert_allclose(usage, [[0, 0, 0, 10], [0, 0, 10, 0]], atol=1e-9)
