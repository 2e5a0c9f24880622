"""The circuit schedulers on small demand matrices whose schedules are known, and in the simulator."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.config.validation import SpecError
from hybridbed.controller.circuit_schedulers import (
    SOLSTICE_MIN_DAY_OVER_DELAY,
    circuit_scheduler,
    fit_days,
    norm_down,
    perfect_matching,
    rotor_configuration,
    solstice_days,
    stuff,
)
from hybridbed.experiments.run_failed import RunFailed
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.experiments.simulated import run_simulation

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
QUICKSTART = SCENARIOS / "quickstart.yaml"
PAPER_COARSE = SCENARIOS / "jobpacker-paper-sim-coarse.yaml"
MB_S = 1e6 / 8


def pairs(config) -> set[tuple[int, int]]:
    return {(c.src_rack, c.dst_rack) for c in config}


def demand_matrix(racks: int, entries: dict[tuple[int, int], float]) -> list[list[float]]:
    return [[entries.get((a, b), 0.0) for b in range(racks)] for a in range(racks)]


def scheduler(name: str, racks: int = 3, ports: int = 1, **ocs: object):
    fabric = FabricSpec(racks=racks, hosts_per_rack=1, ocs_ports_per_tor=ports, ocs_rate_mbps=8)  # 1 MB/s
    return circuit_scheduler(fabric, OcsSpec(mode="periodic", scheduler=name, **ocs))


def test_greedy_takes_the_heaviest_pair_where_edmonds_takes_the_heaviest_matching():
    # (0,1) is the heaviest pair, but (0,2) + (2,1) together weigh more and cannot go with it
    demand = demand_matrix(3, {(0, 1): 10, (0, 2): 9, (2, 1): 9})
    (greedy,) = scheduler("greedy").schedule(demand, frozenset())
    (edmonds,) = scheduler("edmonds").schedule(demand, frozenset())
    assert pairs(greedy.configuration) == {(0, 1)}
    assert pairs(edmonds.configuration) == {(0, 2), (2, 1)}


def test_greedy_gives_a_rack_as_many_circuits_as_it_has_ports_and_ignores_demand_under_the_threshold():
    demand = demand_matrix(3, {(0, 1): 10, (0, 2): 9, (1, 2): 8, (2, 0): 0.5})
    (slot,) = scheduler("greedy", ports=2, elephant_threshold_bytes=1).schedule(demand, frozenset())
    assert pairs(slot.configuration) == {(0, 1), (0, 2), (1, 2)}
    assert len({(c.src_rack, c.src_port) for c in slot.configuration}) == 3  # rack 0 uses both of its ports


def test_rotor_visits_every_rack_pair_once_per_cycle_whatever_the_demand():
    rotor = scheduler("rotor", racks=4)
    heavy = demand_matrix(4, {(0, 1): 1e9})
    rounds = [pairs(rotor.schedule(heavy, frozenset())[0].configuration) for _ in range(6)]
    assert rounds[0] == {(0, 1), (1, 2), (2, 3), (3, 0)}  # shift 1
    assert rounds[1] == {(0, 2), (1, 3), (2, 0), (3, 1)}  # shift 2
    assert rounds[3:] == rounds[:3]  # a cycle of racks - 1 matchings
    cycle = [p for r in rounds[:3] for p in r]
    assert sorted(cycle) == sorted((a, b) for a in range(4) for b in range(4) if a != b)


def test_rotor_with_two_ports_lights_two_shifts_at_once_on_distinct_ports():
    config = rotor_configuration(5, 2, 1, frozenset())
    assert pairs(config) == {(a, (a + s) % 5) for a in range(5) for s in (3, 4)}
    assert {c.src_port for c in config if c.src_rack == 0} == {0, 1}
    assert rotor_configuration(2, 1, 7, frozenset()) == rotor_configuration(2, 1, 0, frozenset())


def test_solstice_slices_two_permutations_biggest_first_and_fills_the_interval():
    # 0.6 s of circuit time on shift 1 and 0.3 s on shift 2 (3 racks): two days, in that order
    seconds = np.zeros((3, 3))
    for a in range(3):
        seconds[a, (a + 1) % 3] = 0.6
        seconds[a, (a + 2) % 3] = 0.3
    days = solstice_days(seconds, interval_s=1.0, delay_s=0.01)
    assert [set(p) for p, _ in days] == [{(0, 1), (1, 2), (2, 0)}, {(0, 2), (1, 0), (2, 1)}]
    lengths = [length for _, length in days]
    assert sum(lengths) == pytest.approx(1.0)
    assert lengths[0] / lengths[1] == pytest.approx(0.61 / 0.31)  # each with its delay, slack shared in proportion


def test_solstice_gives_the_interval_as_slots_with_offsets_after_each_day():
    solstice = scheduler("solstice", reconfig_interval_s=1.0, reconfig_delay_ms=10)
    demand = {}
    for a in range(3):
        demand[(a, (a + 1) % 3)] = 0.6e6  # 0.6 s at 1 MB/s
        demand[(a, (a + 2) % 3)] = 0.3e6
    slots = solstice.schedule(demand_matrix(3, demand), frozenset())
    assert [s.offset_s for s in slots] == pytest.approx([0.0, 0.61 / 0.92])
    assert pairs(slots[0].configuration) == {(0, 1), (1, 2), (2, 0)}
    assert solstice.schedule(demand_matrix(3, {}), frozenset())[0].configuration == frozenset()


def test_solstice_leaves_to_the_eps_what_is_too_small_for_a_day_of_its_own():
    seconds = np.zeros((3, 3))
    seconds[0, 1] = 0.5
    seconds[1, 2] = SOLSTICE_MIN_DAY_OVER_DELAY * 0.01 * 0.9  # under the shortest day
    days = solstice_days(seconds, interval_s=1.0, delay_s=0.01)
    assert len(days) == 1 and (0, 1) in days[0][0] and (1, 2) not in days[0][0]


def test_norm_down_caps_every_sender_and_receiver_at_the_interval_max_min_fairly():
    # receiver 1 is asked for 2.0 + 0.5 s: an even split; sender 0's 0.3 s fits beside its 0.5
    capped = norm_down(np.array([[0.0, 2.0, 0.3], [0.0, 0.0, 0.0], [0.0, 0.5, 0.0]]), 1.0)
    assert capped == pytest.approx(np.array([[0.0, 0.5, 0.3], [0.0, 0.0, 0.0], [0.0, 0.5, 0.0]]))
    # sender 0 asks 3 x 0.5 s: each gets a third, the small entry its own 0.2 and the rest share 0.8
    capped = norm_down(np.array([[0.0, 0.5, 0.5, 0.2], *np.zeros((3, 4))]), 1.0)
    assert capped[0] == pytest.approx([0.0, 0.4, 0.4, 0.2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 2), min_size=16, max_size=16), st.sampled_from([0.0, 0.01, 0.05]))
def test_solstice_is_a_schedule_the_ocs_can_run(values, delay_s):
    """Stuffing gives equal line sums above the demand; every day is a matching of real demand; the days fill
    the interval, none shorter than the shortest day; a pair's circuit time covers its capped demand but for
    less than one shortest day (what the decomposition leaves to the EPS) when the days fit."""
    seconds = np.array(values).reshape(4, 4)
    np.fill_diagonal(seconds, 0.0)
    stuffed = stuff(seconds)
    assert (stuffed >= seconds - 1e-12).all()
    sums = np.concatenate([stuffed.sum(axis=0), stuffed.sum(axis=1)])
    assert sums == pytest.approx(np.full(8, sums.max()))
    days = solstice_days(seconds, interval_s=1.0, delay_s=delay_s)
    min_day = max(SOLSTICE_MIN_DAY_OVER_DELAY * delay_s, 2 * delay_s) or 0.01
    if not days:
        assert (norm_down(seconds, 1.0 - delay_s) < min_day).all()
        return
    assert sum(length for _, length in days) == pytest.approx(1.0)
    for day, length in days:
        assert len({a for a, _ in day}) == len(day) == len({b for _, b in day})  # a matching
        assert all(a != b for a, b in day)  # a perfect matching less any rack paired with itself
        assert any(seconds[a, b] > 0 for a, b in day)
        assert length >= min_day + delay_s - 1e-9


def test_perfect_matching_needs_every_sender_and_receiver():
    assert perfect_matching(np.array([[0, 1], [1, 0]], dtype=bool)) is not None
    assert perfect_matching(np.array([[1, 1], [0, 0]], dtype=bool)) is None


def test_fit_days_drops_the_shortest_when_even_shortened_days_do_not_fit():
    days = [([(0, 1)], 0.5), ([(1, 0)], 0.2), ([(0, 2)], 0.45), ([(2, 0)], 0.4)]
    fitted = fit_days(days, 1.0, shortest_s=0.3)
    assert [p for p, _ in fitted] == [[(0, 1)], [(0, 2)], [(2, 0)]]
    assert sum(length for _, length in fitted) == pytest.approx(1.0)
    assert min(length for _, length in fitted) >= 0.3 - 1e-12


def test_solstice_needs_one_ocs_port_per_tor():
    with pytest.raises(SpecError, match="ocs.scheduler solstice schedules one OCS port per ToR"):
        load_scenario(QUICKSTART, {"ocs.scheduler": "solstice", "fabric.ocs_ports_per_tor": 2})


@pytest.mark.parametrize("name", ["greedy", "solstice", "rotor"])
def test_every_scheduler_runs_the_simulated_quickstart(tmp_path, name):
    overrides = {"backend": "simulation", "ocs.scheduler": name, "ocs.measured_demand": "backlog"}
    scenario = load_scenario(QUICKSTART, overrides)
    summary = run_simulation(scenario, tmp_path / name)
    assert summary["status"] == "done" and summary["reconfigurations"] > 0
    events = pd.read_csv(tmp_path / name / "ocs_events.csv")
    ticks = events.requested_s / scenario.ocs.reconfig_interval_s
    between_ticks = (ticks - ticks.round()).abs() > 0.01
    if name == "solstice":  # later days are set up within the interval
        assert between_ticks.any()
    else:
        assert not between_ticks.any()
    if name == "rotor":  # every pair of the 4 racks gets a circuit in turn
        after = [pairs_of(c) for c in events.circuits_after]
        assert set(itertools.chain.from_iterable(after)) == {(a, b) for a in range(4) for b in range(4) if a != b}


def pairs_of(circuits: str) -> set[tuple[int, int]]:
    return {(c["src_rack"], c["dst_rack"]) for c in json.loads(circuits)}


def test_solstice_lights_nothing_when_every_pair_needs_more_than_the_interval_shares_out():
    """Why Solstice cannot serve waiting elephants: capped to the interval, each of a sender's 19 pairs gets
    under one shortest day (90 ms at a 10 ms delay), and Solstice leaves all of it to the EPS."""
    seconds = np.full((20, 20), 1.5)
    np.fill_diagonal(seconds, 0.0)
    assert solstice_days(seconds, interval_s=1.0, delay_s=0.01) == []


def test_solstice_is_refused_where_elephants_wait_for_their_circuit():
    with pytest.raises(SpecError, match="ocs.scheduler solstice .* ocs.elephants_wait keeps elephants off the EPS"):
        load_scenario(PAPER_COARSE, {"ocs.scheduler": "solstice"})
    assert load_scenario(PAPER_COARSE, {"ocs.scheduler": "solstice", "ocs.elephants_wait": False}).ocs.scheduler == (
        "solstice"
    )


def test_elephants_wait_only_where_periodic_reconfigurations_light_circuits():
    with pytest.raises(SpecError, match="ocs.elephants_wait needs ocs.mode periodic"):
        load_scenario(PAPER_COARSE, {"ocs.mode": "pinned"})


def test_a_run_past_its_deadline_names_the_elephants_still_waiting_for_a_circuit(tmp_path):
    """The first reconfiguration comes after the deadline: the elephants wait to the end, and the failure says
    so."""
    overrides = {
        "backend": "simulation",
        "ocs.reconfig_interval_s": 3600,
        "ocs.steering": "elephant",
        "ocs.elephants_wait": True,
        "max_duration_s": 300,
    }
    with pytest.raises(
        RunFailed,
        match=r"the elephants of \d+ rack pairs \([\d,]+ bytes\) still wait for a circuit from ocs.scheduler edmonds",
    ):
        run_simulation(load_scenario(QUICKSTART, overrides), tmp_path / "run")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "failed"
