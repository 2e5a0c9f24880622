"""The flow entries the controller installs, computed without a switch (controller/rules.py)."""

from __future__ import annotations

import pytest

from hybridbed.config.addressing import EPS_DPID, OCS_DPID, FabricPlan
from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.controller.circuits import Circuit
from hybridbed.controller.rules import (
    COOKIE_CIRCUIT,
    COOKIE_EPS,
    COOKIE_MARKED_EPS,
    PRIO_CIRCUIT,
    PRIO_EPS,
    PRIO_HOST,
    PRIO_MARKED_EPS,
    demand_cookies,
    switch_entries,
)

PLAN = FabricPlan(FabricSpec(racks=3, hosts_per_rack=2))
ALL = OcsSpec()
MARKED = OcsSpec(steering="marked", bulk_dscp=10)
CIRCUIT_0_TO_1 = frozenset({Circuit(0, 1)})


def test_a_tor_delivers_to_its_hosts_and_sends_other_racks_up_the_eps():
    entries = switch_entries(PLAN, ALL, PLAN.tor_dpid(1), frozenset())
    hosts = [e for e in entries if e.priority == PRIO_HOST]
    assert [(e.match_fields()["ipv4_dst"], e.out_port) for e in hosts] == [("10.0.1.1", 1), ("10.0.1.2", 2)]
    eps = [e for e in entries if e.priority == PRIO_EPS]
    assert {e.match_fields()["ipv4_dst"] for e in eps} == {PLAN.rack_subnet(0), PLAN.rack_subnet(2)}
    assert {e.out_port for e in eps} == {PLAN.tor_eps_port}
    assert {e.cookie for e in eps} == {COOKIE_EPS | 0, COOKIE_EPS | 2}  # flow stats split bytes by destination
    assert not [e for e in entries if e.priority in (PRIO_CIRCUIT, PRIO_MARKED_EPS)]
    assert demand_cookies(ALL) == COOKIE_EPS | COOKIE_CIRCUIT  # every byte to another rack is demand


def test_when_only_marked_traffic_rides_circuits_marked_traffic_has_eps_entries_of_its_own():
    entries = switch_entries(PLAN, MARKED, PLAN.tor_dpid(0), CIRCUIT_0_TO_1)
    marked_eps = [e for e in entries if e.priority == PRIO_MARKED_EPS]
    assert {e.match_fields()["ipv4_dst"] for e in marked_eps} == {PLAN.rack_subnet(1), PLAN.rack_subnet(2)}
    assert {e.match_fields()["ip_dscp"] for e in marked_eps} == {10}
    assert {e.out_port for e in marked_eps} == {PLAN.tor_eps_port}
    assert {e.cookie for e in marked_eps} == {COOKIE_MARKED_EPS | 1, COOKIE_MARKED_EPS | 2}
    # the circuit's entry outranks the marked EPS entry, which outranks the unmarked one
    assert PRIO_CIRCUIT > PRIO_MARKED_EPS > PRIO_EPS
    # measured demand: marked bytes only (over the EPS or a circuit), not the unmarked EPS entries
    cookies = demand_cookies(MARKED)
    assert all(e.cookie & cookies for e in entries if e.priority in (PRIO_MARKED_EPS, PRIO_CIRCUIT))
    assert not any(e.cookie & cookies for e in entries if e.priority == PRIO_EPS)


def test_a_lit_circuit_steers_only_its_source_tor_and_only_marked_traffic_in_marked_mode():
    steer = [e for e in switch_entries(PLAN, ALL, PLAN.tor_dpid(0), CIRCUIT_0_TO_1) if e.priority == PRIO_CIRCUIT]
    assert len(steer) == 1
    assert steer[0].out_port == PLAN.tor_ocs_port(0) and steer[0].cookie == COOKIE_CIRCUIT | 1
    assert steer[0].match_fields() == {"eth_type": 0x0800, "ipv4_dst": PLAN.rack_subnet(1)}
    marked = [e for e in switch_entries(PLAN, MARKED, PLAN.tor_dpid(0), CIRCUIT_0_TO_1) if e.priority == PRIO_CIRCUIT]
    assert marked[0].match_fields()["ip_dscp"] == 10
    for rack in (1, 2):  # the other ToRs keep using the EPS for everything
        assert not [
            e for e in switch_entries(PLAN, ALL, PLAN.tor_dpid(rack), CIRCUIT_0_TO_1) if e.priority == PRIO_CIRCUIT
        ]


def test_the_eps_routes_by_rack_subnet_and_the_ocs_only_along_lit_circuits():
    eps = switch_entries(PLAN, ALL, EPS_DPID, CIRCUIT_0_TO_1)
    assert {(e.match_fields()["ipv4_dst"], e.out_port) for e in eps} == {
        (PLAN.rack_subnet(r), PLAN.eps_port(r)) for r in range(3)
    }
    assert switch_entries(PLAN, ALL, OCS_DPID, frozenset()) == []
    (ocs,) = switch_entries(PLAN, ALL, OCS_DPID, CIRCUIT_0_TO_1)
    assert ocs.match_fields() == {"in_port": PLAN.ocs_port(0, 0)} and ocs.out_port == PLAN.ocs_port(1, 0)


def test_no_two_entries_of_a_switch_compete_for_the_same_packets():
    circuits = frozenset({Circuit(0, 1), Circuit(1, 2), Circuit(2, 0)})
    for dpid in [*(PLAN.tor_dpid(r) for r in range(3)), EPS_DPID, OCS_DPID]:
        entries = switch_entries(PLAN, ALL, dpid, circuits)
        keys = [(e.priority, e.match) for e in entries]
        assert len(keys) == len(set(keys)), dpid


def test_an_unknown_switch_is_refused():
    with pytest.raises(ValueError, match="not a switch of this fabric"):
        switch_entries(PLAN, ALL, 0x4242, frozenset())
