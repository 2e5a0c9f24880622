from __future__ import annotations

import pytest

from hybridbed.config.addressing import FabricPlan
from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.config.scenario import Scenario
from hybridbed.config.validation import SpecError, parse_spec


def test_eps_rate_follows_oversubscription_and_variant():
    assert FabricSpec(racks=2, hosts_per_rack=4, host_rate_mbps=10, oversubscription=4).eps_uplink_mbps == 10
    assert FabricSpec(racks=2, hosts_per_rack=4, eps_rate_mbps=7).eps_uplink_mbps == 7
    assert FabricSpec(racks=2, hosts_per_rack=4, ocs_rate_mbps=33, variant="f-eps").eps_uplink_mbps == 33


@pytest.mark.parametrize(
    "data, field",
    [
        ({"racks": 0, "hosts_per_rack": 1}, "racks"),
        ({"racks": 2, "hosts_per_rack": 1, "host_rate_mbps": -5}, "host_rate_mbps"),
        ({"racks": 2, "hosts_per_rack": 1, "ocs_rate_mbps": "fast"}, "ocs_rate_mbps"),
        ({"racks": 2, "hosts_per_rack": 1, "tor_colour": "red"}, "tor_colour"),
    ],
)
def test_bad_fabric_values_name_their_field(data, field):
    with pytest.raises(SpecError, match=field):
        parse_spec(FabricSpec, data)


@pytest.mark.parametrize(
    "data, field",
    [
        ({"racks": 2, "hosts_per_rack": 1, "host_rate_mbps": 5000}, "host_rate_mbps"),
        ({"racks": 2, "hosts_per_rack": 1, "ocs_rate_mbps": 100_000}, "ocs_rate_mbps"),
        ({"racks": 2, "hosts_per_rack": 100, "host_rate_mbps": 1000, "oversubscription": 1}, "EPS uplink rate"),
    ],
)
def test_rates_above_a_shaped_link_are_for_simulation_only(data, field):
    fabric = parse_spec(FabricSpec, data)
    assert any(field in problem for problem in fabric.emulation_limits())
    scenario = {"name": "fast", "fabric": data}
    with pytest.raises(SpecError, match=f"fabric.*{field}"):
        parse_spec(Scenario, scenario)
    assert parse_spec(Scenario, {**scenario, "backend": "simulation"}).fabric == fabric
    assert not parse_spec(FabricSpec, {"racks": 2, "hosts_per_rack": 1, "host_rate_mbps": 1000}).emulation_limits()


def test_bad_ocs_values_name_their_field():
    with pytest.raises(SpecError, match="steering"):
        parse_spec(OcsSpec, {"steering": "some"})
    with pytest.raises(SpecError, match="reconfig_delay_ms"):
        parse_spec(OcsSpec, {"reconfig_delay_ms": -1})


def test_address_plan_is_unique_and_consistent():
    plan = FabricPlan(FabricSpec(racks=3, hosts_per_rack=4, ocs_ports_per_tor=2))
    hosts = plan.hosts()
    assert len({h.ip for h in hosts}) == len({h.mac for h in hosts}) == len({h.name for h in hosts}) == 12
    assert all(plan.rack_of_ip(h.ip) == h.rack for h in hosts)
    tor_ports = [h.tor_port for h in hosts if h.rack == 0] + [
        plan.tor_eps_port,
        plan.tor_ocs_port(0),
        plan.tor_ocs_port(1),
    ]
    assert len(set(tor_ports)) == len(tor_ports)
    ocs_ports = [plan.ocs_port(r, k) for r in range(3) for k in range(2)]
    assert sorted(ocs_ports) == list(range(1, 7))
    assert len(set(plan.switch_names())) == 5
    with pytest.raises(ValueError, match="rack 3"):
        plan.host(3, 0)


def test_f_eps_plan_has_no_ocs():
    plan = FabricPlan(FabricSpec(racks=2, hosts_per_rack=1, variant="f-eps"))
    assert "ocs" not in plan.switch_names().values()
    assert plan.ocs_ports_per_tor == 0
