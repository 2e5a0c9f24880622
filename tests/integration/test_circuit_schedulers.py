"""The controller running the rotor and Solstice circuit schedulers on a real fabric: rotor steps through its
matchings whatever the demand, and traffic rides each circuit in turn; Solstice sets up two configurations
per interval at the offsets its schedule gives."""

from __future__ import annotations

import time

import pytest

from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.controller.circuit_schedulers import circuit_scheduler
from hybridbed.testbed import probes
from hybridbed.testbed.network import HybridNetwork

FABRIC = FabricSpec(racks=3, hosts_per_rack=1, host_rate_mbps=10, eps_rate_mbps=1, ocs_rate_mbps=8)
SHIFT_1 = {(0, 1), (1, 2), (2, 0)}
SHIFT_2 = {(0, 2), (1, 0), (2, 1)}


def _pairs(circuits: list[dict]) -> frozenset[tuple[int, int]]:
    return frozenset((c["src_rack"], c["dst_rack"]) for c in circuits)


def _events_for(net: HybridNetwork, seconds: float) -> list:
    time.sleep(seconds)
    return [e for e in net.controller.events() if e.reason == "periodic"]


def test_rotor_steps_through_its_matchings_and_traffic_rides_each_circuit():
    ocs = OcsSpec(mode="periodic", scheduler="rotor", reconfig_interval_s=0.5, reconfig_delay_ms=10)
    with HybridNetwork(FABRIC, ocs) as net:
        # no demand at all: rotor lights its matchings anyway, alternating the two shifts of 3 racks
        events = _events_for(net, 2.6)
        assert len(events) >= 3
        configs = [_pairs(e.circuits_after) for e in events]
        assert set(configs) == {frozenset(SHIFT_1), frozenset(SHIFT_2)}
        assert all(a != b for a, b in zip(configs, configs[1:]))
        gaps = [b.requested - a.requested for a, b in zip(events, events[1:])]
        assert all(0.4 < gap < 0.6 for gap in gaps)
        # a flow from rack 0 to rack 1 rides the circuit every other interval: more than the EPS's 1 Mb/s
        (result,) = probes.goodput(net, [((0, 0), (1, 0))], 4, omit_s=0)
        assert result.mbps > 1.5


def test_solstice_sets_up_the_days_of_its_schedule_within_each_interval():
    ocs = OcsSpec(
        mode="periodic",
        scheduler="solstice",
        reconfig_interval_s=1.0,
        reconfig_delay_ms=10,
        demand_source="hints",
    )
    # 0.6 s of circuit time (at 8 Mb/s) on shift 1 and 0.3 s on shift 2: two days, shift 1 first
    demand = [[0.0] * 3 for _ in range(3)]
    for a in range(3):
        demand[a][(a + 1) % 3] = 0.6e6
        demand[a][(a + 2) % 3] = 0.3e6
    expected = circuit_scheduler(FABRIC, ocs).schedule(demand, frozenset())
    assert len(expected) == 2
    with HybridNetwork(FABRIC, ocs) as net:
        net.controller.set_demand(demand)
        events = _events_for(net, 4.5)
    configs = [_pairs(e.circuits_after) for e in events]
    firsts = [i for i, c in enumerate(configs) if c == frozenset(SHIFT_1) and i + 1 < len(configs)]
    assert len(firsts) >= 2, configs
    for i in firsts:
        assert configs[i + 1] == frozenset(SHIFT_2)
        offset = events[i + 1].requested - events[i].requested
        assert offset == pytest.approx(expected[1].offset_s, abs=0.05)
