"""Multi-server placement, servers files, tunnel plans and the preflight's verdicts: pure logic, no ssh."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybridbed.config.addressing import FabricPlan
from hybridbed.config.fabric import FabricSpec
from hybridbed.config.servers import ServerSpec, load_servers, place_racks
from hybridbed.config.validation import SpecError
from hybridbed.testbed.preflight import MAX_CLOCK_OFFSET_S, ServerFacts, problems
from hybridbed.testbed.remote import plan_tunnels
from hybridbed.testbed.tunnels import VXLAN_OVERHEAD, tunnel_mtu


def _server(host: str = "a", **fields) -> ServerSpec:
    return ServerSpec(host=host, **fields)


@pytest.mark.parametrize(
    ("racks", "servers", "placement"),
    [
        (4, [_server()], [0, 0, 1, 1]),
        (5, [_server()], [0, 0, 0, 1, 1]),
        (6, [_server("a", racks=4)], [0, 0, 1, 1, 1, 1]),
        (6, [_server("a", racks=1), _server("b")], [0, 0, 0, 1, 2, 2]),
    ],
)
def test_racks_go_to_servers_in_contiguous_blocks(racks, servers, placement):
    assert place_racks(racks, servers) == placement


@pytest.mark.parametrize(
    ("racks", "servers", "message"),
    [
        (4, [_server(racks=4)], "leave none for this machine"),
        (2, [_server("a"), _server("b")], "2 servers without a `racks` count"),
    ],
)
def test_a_placement_that_leaves_a_server_without_racks_is_refused(racks, servers, message):
    with pytest.raises(SpecError, match=message):
        place_racks(racks, servers)


def test_a_servers_file_is_validated_by_entry_and_field(tmp_path: Path):
    path = tmp_path / "servers.yaml"
    path.write_text("- host: 192.0.2.1\n  port: 70000\n")
    with pytest.raises(SpecError, match=r"servers\.0\.port.*70000"):
        load_servers(path)
    path.write_text("- host: 192.0.2.1\n- host: 192.0.2.1\n")
    with pytest.raises(SpecError, match="listed twice"):
        load_servers(path)
    path.write_text("host: 192.0.2.1\n")
    with pytest.raises(SpecError, match="non-empty list"):
        load_servers(path)
    path.write_text("- host: 192.0.2.1\n  key_file: /k\n")
    assert load_servers(path) == [ServerSpec(host="192.0.2.1", key_file=Path("/k"))]


def test_tunnels_stand_for_the_crossing_links_with_matching_names_and_vnis():
    plan = FabricPlan(FabricSpec(racks=4, hosts_per_rack=2, ocs_ports_per_tor=2))
    (server,) = plan_tunnels(plan, [0, 0, 1, 1], ["192.0.2.2"], ["192.0.2.1"])
    here = {end.name: end for end in server.here}
    there = {end.name: end for end in server.there}
    # per rack on the server: its EPS uplink and its two OCS ports; plus the control tunnel on each side
    assert len(here) == len(there) == 1 + 2 * 3
    assert here["eps-eth3"].vni == there["tor2-eth3"].vni  # ToR r's uplink is ToR port H+1, EPS port r+1
    assert here["ocs-eth8"].vni == there["tor3-eth5"].vni  # (rack 3, OCS port 1): OCS port 3*2+1+1, ToR port H+2+1
    assert len({end.vni for end in server.here}) == len(server.here)
    assert all((e.local_ip, e.remote_ip) == ("192.0.2.1", "192.0.2.2") for e in server.here)
    assert all((e.local_ip, e.remote_ip) == ("192.0.2.2", "192.0.2.1") for e in server.there)
    assert here["ctl1"].address == f"{server.controller_ip}/24" and there["ctl0"].address != here["ctl1"].address


def test_a_tunnel_carries_ethernet_frames_or_what_the_underlay_leaves():
    assert tunnel_mtu(9000) == 1500
    assert tunnel_mtu(1500) == 1500 - VXLAN_OVERHEAD


def _facts(**fields) -> ServerFacts:
    base = dict(
        uid=0, hybridbed="0.1.0", mininet="2.3.0", ovs="3.1.0", cgroup=True, datapath="user", missing=[],
        congestion_controls=["reno", "cubic"], cpus=4, idle_cores=3.5,
    )  # fmt: skip
    return ServerFacts(**{**base, **fields})


def test_a_ready_server_passes_the_preflight():
    assert problems(_server(), _facts(), 0.001, _facts(), racks=2, congestion_control="cubic") == []


@pytest.mark.parametrize(
    ("facts", "offset", "found"),
    [
        (_facts(uid=1000), 0.0, "uid 1000"),
        (_facts(hybridbed="0.0.9"), 0.0, "hybridbed '0.0.9' differs"),
        (_facts(cgroup=False), 0.0, "no cgroup hierarchy"),
        (_facts(datapath="kernel"), 0.0, "datapath 'kernel' differs from this machine's 'user'"),
        (_facts(missing=["mnexec"]), 0.0, "lacks mnexec"),
        (_facts(), MAX_CLOCK_OFFSET_S * 2, "clock is +10.0 ms off"),
        (_facts(idle_cores=0.4), 0.0, "0.4 idle cores"),
        (_facts(congestion_controls=["reno", "bbr"]), 0.0, "fabric.tcp_congestion_control: 'cubic' is not in"),
    ],
)
def test_each_preflight_problem_is_named_with_its_server(facts, offset, found):
    (problem,) = problems(_server("srv7"), facts, offset, _facts(), racks=2, congestion_control="cubic")
    assert problem.startswith("server srv7: ") and found in problem
