"""Periodic OCS mode on a real fabric: the controller lights the circuits the demand asks for, every interval,
from the scheduler's hints and from what the ToRs measure."""

from __future__ import annotations

import threading
import time
from typing import Any

import pandas as pd
import pytest

from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.controller.client import ControllerError
from hybridbed.controller.demand_log import read_demand_log
from hybridbed.results.phases import circuit_endings
from hybridbed.testbed import probes
from hybridbed.testbed.network import HybridNetwork

INTERVAL_S = 0.5
THRESHOLD_BYTES = 20_000  # below what one flow moves per interval even on the 1 Mb/s EPS uplink


def periodic_ocs(**fields: Any) -> OcsSpec:
    """An OCS reconfigured every INTERVAL_S, with the test's own other fields."""
    return OcsSpec(mode="periodic", reconfig_interval_s=INTERVAL_S, **fields)


@pytest.fixture(scope="module")
def periodic():
    ocs = periodic_ocs(reconfig_delay_ms=10, demand_source="both", elephant_threshold_bytes=THRESHOLD_BYTES)
    with HybridNetwork(FabricSpec(racks=3, hosts_per_rack=1), ocs) as net:
        yield net


def _pairs(circuits: list[dict]) -> set[tuple[int, int]]:
    return {(c["src_rack"], c["dst_rack"]) for c in circuits}


def _wait_for_circuits(net: HybridNetwork, wanted: set[tuple[int, int]], timeout: float = 6.0) -> set[tuple[int, int]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lit = _pairs(net.controller.circuits())
        if lit == wanted:
            return lit
        time.sleep(0.1)
    return _pairs(net.controller.circuits())


def _event_for(net: HybridNetwork, wanted: set[tuple[int, int]], timeout: float = 2.0) -> dict:
    """The reconfiguration event that lit `wanted`: the controller reports its target circuits as soon as it
    starts moving to them and logs the event once they are lit, so the event may come a moment later."""
    deadline = time.monotonic() + timeout
    while True:
        events = net.controller.events()
        if events and _pairs(events[-1].circuits_after) == wanted or time.monotonic() > deadline:
            assert events, "no reconfiguration event logged"
            return events[-1]
        time.sleep(0.05)


def _demand(racks: int, entries: dict[tuple[int, int], float]) -> list[list[float]]:
    return [[entries.get((a, b), 0.0) for b in range(racks)] for a in range(racks)]


def test_pinning_is_refused_in_periodic_mode(periodic):
    with pytest.raises(ControllerError) as err:
        periodic.controller.set_circuits([{"src_rack": 0, "dst_rack": 1}])
    assert err.value.status == 409


def test_hinted_demand_lights_the_max_weight_matching(periodic):
    # 0->1 and 0->2 compete for rack 0's single OCS port: the heavier one wins; 1->2 is compatible with it
    hints = _demand(3, {(0, 1): 5e6, (0, 2): 1e6, (1, 2): 3e6, (2, 0): THRESHOLD_BYTES / 2})
    periodic.controller.set_demand(hints)
    assert _wait_for_circuits(periodic, {(0, 1), (1, 2)}) == {(0, 1), (1, 2)}
    event = _event_for(periodic, {(0, 1), (1, 2)})
    assert event.reason == "periodic"
    assert _pairs(event.circuits_after) == {(0, 1), (1, 2)}

    periodic.controller.set_demand(_demand(3, {}))
    assert _wait_for_circuits(periodic, set()) == set()


def test_measured_elephant_gets_a_circuit(periodic):
    periodic.controller.set_demand(_demand(3, {}))
    assert _wait_for_circuits(periodic, set()) == set()
    seen: set[tuple[int, int]] = set()
    results = []
    flow = threading.Thread(target=lambda: results.extend(probes.goodput(periodic, [((2, 0), (0, 0))], 4, omit_s=0)))
    flow.start()
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline and (2, 0) not in seen:
        seen |= _pairs(periodic.controller.circuits())
        time.sleep(0.1)
    flow.join()
    assert (2, 0) in seen
    assert results[0].bytes_received > 0
    assert _wait_for_circuits(periodic, set()) == set(), "the circuit should go once the flow has ended"
    # the demand log says why: the circuit was lit for bytes the ToR counted, and went because they stopped (the
    # flow's last interval may still carry a few, under the threshold), not because another pair outweighed it
    time.sleep(INTERVAL_S)  # the event is logged once the switches confirmed it
    demand = pd.DataFrame(read_demand_log(periodic.demand_log, 0.0))
    lit_for = demand[(demand.src_rack == 2) & (demand.dst_rack == 0) & (demand.elephant == 1)]
    assert (lit_for.sent_bytes >= THRESHOLD_BYTES).any()
    events = pd.DataFrame([event.csv_row() for event in periodic.controller.events()])
    endings = circuit_endings(events, demand)
    assert endings[endings.pair == "2->0"].why.iloc[-1] in ("sent_nothing", "under_threshold")


def test_only_marked_aggregates_count_and_their_backlog_reaches_the_threshold():
    # elephant steering: only marked traffic may ride a circuit, so only marked bytes are demand. Rack 2's
    # marked flow and rack 1's unmarked one both head for rack 0 (one OCS port in): only 2->0 gets it. At
    # 0.5 Mb/s each (they share rack 0's 1 Mb/s EPS downlink) a pair moves ~31 kB per 0.5 s interval, so
    # the 100 kB threshold is crossed by the backlog of several intervals, never by one
    ocs = periodic_ocs(
        demand_source="measured", measured_demand="backlog", steering="elephant", elephant_threshold_bytes=100_000
    )
    fabric = FabricSpec(racks=3, hosts_per_rack=2, host_rate_mbps=10, eps_rate_mbps=1, ocs_rate_mbps=10)
    with HybridNetwork(fabric, ocs) as net:
        seen: set[tuple[int, int]] = set()
        flows = [
            threading.Thread(target=probes.goodput, args=(net, [((2, 0), (0, 0))], 6), kwargs={"dscp": ocs.bulk_dscp}),
            threading.Thread(target=probes.goodput, args=(net, [((1, 0), (0, 1))], 6)),
        ]
        started = time.monotonic()
        for flow in flows:
            flow.start()
        first_lit = None
        while any(flow.is_alive() for flow in flows):
            lit = _pairs(net.controller.circuits())
            if (2, 0) in lit and first_lit is None:
                first_lit = time.monotonic() - started
            seen |= lit
            time.sleep(0.1)
        for flow in flows:
            flow.join()
        demand = pd.DataFrame(read_demand_log(net.demand_log, 0.0))
    assert (2, 0) in seen and (1, 0) not in seen
    # logged as the matching saw it: 2->0 an elephant by its backlog, 1->0's unmarked bytes never demand
    elephant = demand[(demand.src_rack == 2) & (demand.dst_rack == 0) & (demand.elephant == 1)].iloc[0]
    assert 0 < elephant.sent_bytes < 100_000 <= elephant.measured_bytes == elephant.demand_bytes
    assert not ((demand.src_rack == 1) & (demand.dst_rack == 0)).any()
    # one interval at the whole 1 Mb/s downlink carries 62.5 kB, under the threshold: only a backlog of more
    # than one interval lights the circuit (100 kB take 0.8 s at the full rate, if the unmarked flow starts late)
    assert first_lit is not None and first_lit > INTERVAL_S


def test_an_ocs_that_reconfigures_every_interval_relights_an_unchanged_matching():
    # skip_unchanged false: the same circuit goes dark for the delay and comes back at every interval
    ocs = periodic_ocs(
        reconfig_delay_ms=20, demand_source="hints", elephant_threshold_bytes=THRESHOLD_BYTES, skip_unchanged=False
    )
    with HybridNetwork(FabricSpec(racks=3, hosts_per_rack=1), ocs) as net:
        net.controller.set_demand(_demand(3, {(0, 1): 5e6}))
        assert _wait_for_circuits(net, {(0, 1)}) == {(0, 1)}
        _event_for(net, {(0, 1)})
        first = len(net.controller.events())
        time.sleep(4 * INTERVAL_S)
        relit = net.controller.events()[first:]
    assert len(relit) >= 3
    for event in relit:
        assert _pairs(event.circuits_before) == _pairs(event.circuits_after) == {(0, 1)}
        assert (event.dark_until - event.dark_from) * 1000 >= 20  # dark for the whole delay
