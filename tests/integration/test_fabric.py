"""The network behaves as configured: reachability, steering, rates, reconfiguration, API validation."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path

import pytest

from hybridbed.config.fabric import FRAME_BYTES, FabricSpec, OcsSpec
from hybridbed.controller.client import ControllerError
from hybridbed.controller.rest_api import body_limit_bytes
from hybridbed.results.fidelity import DATAPATH_LOSS_WARN_SHARE
from hybridbed.testbed import probes
from hybridbed.testbed.fidelity import RECONFIG_SAMPLES, check_steering
from hybridbed.testbed.fidelity_monitor import parse_net_dev, parse_qdiscs
from hybridbed.testbed.network import HybridNetwork
from hybridbed.testbed.runs import RunManifest
from hybridbed.testbed.shaping import burst_bytes, shaped_ports

from .conftest import RECONFIG_DELAY_MS, assert_goodput_is


def test_every_host_reaches_every_host_over_the_eps(clean_circuits):
    net = clean_circuits
    before = probes.settled_port_bytes(net)
    assert net.net.pingAll(timeout="1") == 0.0
    after = probes.settled_port_bytes(net)
    ocs_bytes = sum(probes.bytes_delta(before, after, "ocs", p) for p in after["ocs"])
    assert ocs_bytes == 0, "with no circuits nothing may cross the OCS"


def test_circuit_carries_its_rack_pair_and_nothing_else(clean_circuits):
    assert check_steering(clean_circuits)


def test_marked_steering_takes_only_bulk_traffic_onto_the_circuit(fabric):
    ocs = OcsSpec(steering="marked")
    with HybridNetwork(fabric, ocs) as net:
        net.controller.set_circuits([{"src_rack": 0, "dst_rack": 1}])
        ocs_port, eps_port = net.plan.tor_ocs_port(0), net.plan.tor_eps_port
        for dscp, on, off in [(None, eps_port, ocs_port), (ocs.bulk_dscp, ocs_port, eps_port)]:
            before = probes.settled_port_bytes(net)
            sent = probes.goodput(net, [((0, 0), (1, 0))], 1.5, dscp=dscp, omit_s=0)[0].bytes_received
            after = probes.settled_port_bytes(net)
            assert probes.bytes_delta(before, after, "tor0", on) >= sent
            assert probes.bytes_delta(before, after, "tor0", off) < 0.05 * sent


@pytest.mark.parametrize("path", ["eps", "ocs"])
def test_tcp_goodput_matches_the_configured_rate(clean_circuits, fabric, path):
    net = clean_circuits
    if path == "ocs":
        net.controller.set_circuits([{"src_rack": 0, "dst_rack": 1}])
        configured = min(fabric.host_rate_mbps, fabric.ocs_rate_mbps)
    else:
        configured = min(fabric.host_rate_mbps, fabric.eps_uplink_mbps)
    assert_goodput_is(net, configured)


BURST_WINDOW_S = 0.01  # ten frames' time at the test fabric's 10 Mb/s host rate


def test_a_hosts_tcp_enters_its_tor_at_the_host_links_rate_not_in_bursts(clean_circuits, fabric):
    """Within any 10 ms, a bulk TCP flow to a host of its rack puts into its ToR no more than its host link
    carries in that time plus the link's burst. Linux's TCP hands the qdisc multi-frame segments even with
    segmentation offloads off, and the host link's HTB charged each at once: its frames then left back to back
    at the veth's speed, 23-37 of them (34.8-55.8 kB) within 10 ms where the link carries 8
    (docs/network.md, "Frames, not segments")."""
    rate_bytes_per_s = fabric.host_rate_mbps * 1e6 / 8
    largest, frames = probes.host_link_burst(clean_circuits, (0, 0), (0, 1), BURST_WINDOW_S)
    assert frames > 1000, "the flow did not run"
    allowed = rate_bytes_per_s * BURST_WINDOW_S + burst_bytes(fabric.host_rate_mbps) + FRAME_BYTES
    assert largest <= allowed, (
        f"{largest} bytes entered the ToR within {BURST_WINDOW_S * 1000:g} ms (at most {allowed:.0f})"
    )


def _switch_packets(fabric: FabricSpec) -> tuple[int, int, int]:
    """Packets the switch ports received and sent, and those their shaped queues dropped, so far (this test
    process is in the run's namespace)."""
    ports = {p.interface for p in shaped_ports(fabric)}
    packets = parse_net_dev(Path("/proc/thread-self/net/dev").read_text())
    qdiscs = parse_qdiscs(subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True).stdout)
    return (
        sum(packets[p].received for p in ports),
        sum(packets[p].sent for p in ports),
        sum(qdiscs[p].drops for p in ports),
    )


def test_the_datapath_loses_no_packet_behind_the_shaped_queues_under_all_to_all_load(clean_circuits, fabric):
    """Every host sends to the hosts of two other racks at once, over circuits and the EPS, so that queues fill on
    many ports together: the switches send on every packet they receive that a shaped queue did not drop.
    (With the datapath's send buffer at the kernel's default they lost over 4 % of them besides.)"""
    net = clean_circuits
    net.controller.set_circuits([{"src_rack": a, "dst_rack": b} for a, b in [(0, 1), (1, 0), (2, 3), (3, 2)]])
    racks, hosts = fabric.racks, fabric.hosts_per_rack
    pairs = [((r, h), ((r + d) % racks, h)) for r in range(racks) for h in range(hosts) for d in (1, 2)]
    received_0, sent_0, dropped_0 = _switch_packets(fabric)
    probes.goodput(net, pairs, seconds=4)
    time.sleep(1.0)  # the queues drain
    received_1, sent_1, dropped_1 = _switch_packets(fabric)
    received, missing, dropped = (
        received_1 - received_0,
        (received_1 - sent_1) - (received_0 - sent_0),
        dropped_1 - dropped_0,
    )
    assert received > 30_000 and dropped > 0, "the load did not fill the queues"
    lost = missing - dropped  # tc's count of the queue drops is itself off by a few tenths of a percent
    assert lost <= DATAPATH_LOSS_WARN_SHARE * received, f"{lost} of {received} packets lost in the datapath"


# The userspace datapath applies a flow-mod to packets in flight once its revalidators have updated the flows
# it has cached, which moves either end of a delivery gap by up to a few milliseconds now and then (the most
# seen: a 50 ms gap measured at 46.7 ms in a CI run; docs/network.md, "OCS delivery gap").
DATAPATH_LAG_MS = 5.0


def test_reconfiguration_gap_is_the_configured_delay(clean_circuits):
    # the median of RECONFIG_SAMPLES reconfigurations, as `hybridbed check` reads it: a single gap runs long now and
    # then (one 50 ms gap read 65.8 ms in a CI run on a VM running twice as slow as usual)
    samples = [probes.reconfiguration_gap(clean_circuits) for _ in range(RECONFIG_SAMPLES)]
    for _, event in samples:
        assert event.dark_until - event.dark_from >= RECONFIG_DELAY_MS / 1000
    # a gap runs from one switch applying the unsteering to another applying the steering
    gap_ms = statistics.median(gap_s for gap_s, _ in samples) * 1000
    assert RECONFIG_DELAY_MS - DATAPATH_LAG_MS <= gap_ms <= RECONFIG_DELAY_MS + 15, [g * 1000 for g, _ in samples]


def test_flow_moved_to_the_eps_during_reconfiguration_keeps_going(clean_circuits):
    net = clean_circuits
    net.controller.set_circuits([{"src_rack": 0, "dst_rack": 1}])
    results: list = []
    flow = threading.Thread(target=lambda: results.extend(probes.goodput(net, [((0, 0), (1, 0))], 4, omit_s=0)))
    flow.start()
    threading.Event().wait(1.5)
    event = net.controller.set_circuits([{"src_rack": 0, "dst_rack": 2}])
    flow.join()
    assert event.circuits_after[0]["dst_rack"] == 2
    assert results and all(rate > 0 for rate in results[0].intervals_mbps), results[0].intervals_mbps


INVALID_CIRCUITS = [
    ([{"src_rack": 0, "dst_rack": 9}], "unknown rack"),
    ([{"src_rack": 0, "dst_rack": 1}, {"src_rack": 0, "dst_rack": 2}], "sends in two circuits"),
    ([{"src_rack": 0, "dst_rack": 1}, {"src_rack": 2, "dst_rack": 1}], "receives in two circuits"),
    ([{"src_rack": 3, "dst_rack": 3}], "self-circuit"),
    ([{"src_rack": "0", "dst_rack": 1}], "must be an integer"),
]
INVALID_DEMAND = [
    ([[0, -1, 0, 0]] + [[0] * 4] * 3, "must not be negative"),
    ([[0, "lots", 0, 0]] + [[0] * 4] * 3, "finite number"),
    ([[0, 1]], "list of 4 rows"),
]


def test_invalid_api_input_is_rejected_and_changes_nothing(clean_circuits):
    net = clean_circuits
    pinned = [{"src_rack": 1, "dst_rack": 2, "src_port": 0, "dst_port": 0}]
    net.controller.set_circuits(pinned)
    hints = net.controller.demand()["hints"]
    events = len(net.controller.events())
    for body, message in INVALID_CIRCUITS:
        with pytest.raises(ControllerError) as err:
            net.controller.set_circuits(body)
        assert err.value.status == 400 and message in err.value.message
    for matrix, message in INVALID_DEMAND:
        with pytest.raises(ControllerError) as err:
            net.controller.set_demand(matrix)
        assert err.value.status == 400 and message in err.value.message
    for path in ("/circuits", "/demand"):
        with pytest.raises(ControllerError) as err:
            net.controller.put_raw(path, b'{"circuits": [')
        assert err.value.status == 400 and "not valid JSON" in err.value.message
    limit = body_limit_bytes(net.fabric.racks)
    for raw, status, message in [
        (b'{"demand": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "nested deeper"),
        (b'{"demand": [' + b" " * limit + b"]}", 413, "byte limit"),
    ]:
        with pytest.raises(ControllerError) as err:
            net.controller.put_raw("/demand", raw)
        assert err.value.status == status and message in err.value.message
    assert net.controller.circuits() == pinned
    assert net.controller.demand()["hints"] == hints
    assert len(net.controller.events()) == events


def test_f_eps_variant_reaches_everything_at_the_ocs_rate():
    # hosts faster than the OCS rate, so the EPS uplink (at the OCS rate in f-eps) is the bottleneck; the OCS rate is
    # the default (20 Mb/s): at 40 Mb/s a busy 2-core VM's userspace datapath could not always carry it
    fabric = FabricSpec(racks=3, hosts_per_rack=2, host_rate_mbps=30, ocs_rate_mbps=20, variant="f-eps")
    with HybridNetwork(fabric) as net:
        assert "ocs" not in net.plan.switch_names().values()
        assert net.net.pingAll(timeout="1") == 0.0
        assert fabric.eps_uplink_mbps == fabric.ocs_rate_mbps
        assert_goodput_is(net, fabric.ocs_rate_mbps)


def test_hosts_run_the_fabrics_congestion_control_and_leave_the_machines_alone():
    """A new namespace inherits the machine's default congestion control; the hosts' connections must run the
    fabric's instead, on both ends, and the machine's settings stay as they were. The fabric's differs from the
    machine's default here, so the test tells them apart on any machine."""
    settings = ("tcp_congestion_control", "tcp_allowed_congestion_control")
    machine_settings = [Path("/proc/sys/net/ipv4") / name for name in settings]
    before = [path.read_text() for path in machine_settings]
    wanted = "cubic" if before[0].strip() == "reno" else "reno"  # reno is always built in
    with HybridNetwork(FabricSpec(racks=2, hosts_per_rack=1, tcp_congestion_control=wanted)) as net:
        ends = [(net.host(0, 0), net.plan.host(1, 0).ip), (net.host(1, 0), net.plan.host(0, 0).ip)]
        flow = threading.Thread(target=probes.goodput, args=(net, [((0, 0), (1, 0))]), kwargs={"seconds": 2})
        flow.start()
        seen = ["", ""]  # the sender's connection (it opened it), the receiver's (it accepted it)
        while flow.is_alive() and not all("ESTAB" in text for text in seen):
            time.sleep(0.2)
            seen = [host.cmd(f"ss -tin dst {peer}") for host, peer in ends]
        flow.join()
    for text in seen:
        assert "ESTAB" in text and wanted in text.split(), text
    assert [path.read_text() for path in machine_settings] == before


def test_a_killed_controller_is_restarted_with_its_circuits_and_events_and_the_switches_keep_forwarding():
    with HybridNetwork(FabricSpec(racks=3, hosts_per_rack=1), OcsSpec(reconfig_delay_ms=10)) as net:
        pinned = [{"src_rack": 0, "dst_rack": 1, "src_port": 0, "dst_port": 0}]
        net.controller.set_circuits(pinned)
        before = net.controller.events()
        os.kill(net.controller_proc.pid, signal.SIGKILL)
        # fail-mode secure: while no controller runs the switches keep their rules, so traffic still flows
        assert net.net.pingAll(timeout="1") == 0.0
        deadline = time.monotonic() + 30
        while not (net.controller_restarts and _ready(net)):
            assert time.monotonic() < deadline, "the controller did not come back"
            time.sleep(0.2)
        assert net.controller.circuits() == pinned  # resynchronised from the event log
        assert net.controller.events() == before
        assert net.net.pingAll(timeout="1") == 0.0
        event = net.controller.set_circuits([{"src_rack": 0, "dst_rack": 2, "src_port": 0, "dst_port": 0}])
        assert event is not None and event.seq == len(before)
        assert [p.role for p in RunManifest.load(net.record.manifest_path).processes].count("controller") == 2


def _ready(net: HybridNetwork) -> bool:
    try:
        return bool(net.controller.status()["ready"])
    except (ControllerError, OSError):
        return False
