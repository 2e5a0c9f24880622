"""The run's fidelity verdict from the monitor's samples and the OCS events (pure logic), and what the monitor
reads: the shaped ports of a fabric, tc's qdisc statistics, the ports' packet counters and the hosts' TCP
counters."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from hybridbed.config.fabric import FRAME_BYTES, FabricSpec, queue_packets
from hybridbed.controller.events import OcsEvent
from hybridbed.results.fidelity import BACKLOG_QUEUE_SHARE, DATAPATH_BEHIND_BYTES, fidelity_summary
from hybridbed.testbed.fidelity_monitor import parse_net_dev, parse_qdiscs, read_tcp_counters, tcp_counters
from hybridbed.testbed.ovs import queued_packet_bytes, unbound_packet_sockets
from hybridbed.testbed.shaping import FRAME_TRUESIZE_BYTES, datapath_send_buffer_bytes, shaped_ports

LIMIT = queue_packets(2.0) * FRAME_BYTES  # the sampled links' queue limit (2 Mb/s: 32 frames)
QUEUE = LIMIT // 2


def samples(
    ratios: dict[str, list[float]],
    cpu: list[float],
    queue: int = QUEUE,
    lost: int = 0,
    drops: int = 0,
    forwarding_wait: list[float] | None = None,
    forwarding_cpu: list[float] | None = None,
    datapath_backlog: list[int] | None = None,
) -> pd.DataFrame:
    """One row per link class and interval; each link received 1000 packets an interval, of which its shaped
    queue dropped `drops` and the datapath lost `lost`. The forwarding thread waited for a CPU
    `forwarding_wait[i]` of interval i and ran `forwarding_cpu[i]` of it (0.3 if not given), and its packet
    sockets held `datapath_backlog[i]` bytes at every reading (0 if not given); None: not watched."""
    rows = []
    for i, busy in enumerate(cpu):
        waited = None if forwarding_wait is None else forwarding_wait[i]
        ran = 0.3 if forwarding_cpu is None else forwarding_cpu[i]
        held = 0 if datapath_backlog is None else datapath_backlog[i]
        for link_class, values in ratios.items():
            rows.append(
                {
                    "time_s": 0.5 * (i + 1),
                    "interval_s": 0.5,
                    "cpu_busy_pct": busy,
                    "forwarding_cpu_share": None if waited is None else ran,
                    "forwarding_wait_share": waited,
                    "forwarding_backlog_min_bytes": None if waited is None else held,
                    "link": f"{link_class}-link",
                    "link_class": link_class,
                    "configured_mbps": 2.0,
                    "achieved_mbps": 2.0 * values[i % len(values)],
                    "backlog_start_bytes": queue,
                    "backlog_end_bytes": queue,
                    "drops": drops,
                    "received_packets": 1000,
                    "sent_packets": 1000 - drops - lost,
                }
            )
    return pd.DataFrame(rows)


def events(dark_ms: list[float], delay_ms: float = 10.0) -> pd.DataFrame:
    rows, before = [], []
    for seq, dark in enumerate(dark_ms):
        after = [{"src_rack": seq % 3, "dst_rack": (seq + 1) % 3, "src_port": 0, "dst_port": 0}]
        t = float(seq)
        rows.append(
            OcsEvent(seq, "periodic", t - 0.005, t, t + dark / 1000, t + dark / 1000, delay_ms, before, after).csv_row()
        )
        before = after
    return pd.DataFrame(rows)


def test_a_healthy_run_is_ok_although_single_intervals_fall_short():
    healthy = samples({"tor-eps": [1.0, 0.999, 1.001, 0.6, 1.0, 0.998, 1.0, 0.45, 1.0, 1.0]}, cpu=[40.0] * 40)
    fidelity = fidelity_summary(healthy, events([11.6, 11.4, 12.3]), monitor_cpu_share=0.006)
    assert fidelity["verdict"] == "ok" and fidelity["reasons"] == []
    assert fidelity["links"]["tor-eps"]["ratio_median"] == 1.0 and fidelity["links"]["tor-eps"]["ratio_p5"] < 0.6
    assert fidelity["dark_time_ratio"]["median"] == 1.16 and fidelity["control_lag_ms"]["median"] == 16.6
    assert fidelity["cpu_busy_share"] == 0.0 and fidelity["monitor_cpu_share"] == 0.006


def test_under_delivering_links_make_a_run_warn_or_invalid():
    slow = fidelity_summary(samples({"tor-eps": [0.92]}, cpu=[40.0] * 20), events([]), None)
    assert slow["verdict"] == "warn" and "tor-eps links sent 0.92" in slow["reasons"][0]
    starved = fidelity_summary(samples({"host": [0.3], "tor-eps": [0.92]}, cpu=[40.0] * 20), events([]), None)
    assert starved["verdict"] == "invalid" and len(starved["reasons"]) == 2  # the invalid reason, then the warning


def test_too_few_backlogged_intervals_are_not_judged_and_short_queues_are_not_backlog():
    few = fidelity_summary(samples({"host": [0.3]}, cpu=[40.0] * 9), events([]), None)
    assert few["verdict"] == "ok" and few["links"]["host"]["backlogged_intervals"] == 9
    passing = fidelity_summary(samples({"host": [0.3]}, cpu=[40.0] * 20, queue=1514), events([]), None)
    assert passing["links"]["host"]["backlogged_intervals"] == 0  # one packet caught in passing
    standing = int(BACKLOG_QUEUE_SHARE * LIMIT)
    burst = fidelity_summary(samples({"host": [0.3]}, cpu=[40.0] * 20, queue=standing - 1), events([]), None)
    assert burst["verdict"] == "ok" and burst["links"]["host"]["backlogged_intervals"] == 0  # a sender's burst
    stood = fidelity_summary(samples({"host": [0.3]}, cpu=[40.0] * 20, queue=standing), events([]), None)
    assert stood["verdict"] == "invalid" and stood["links"]["host"]["backlogged_intervals"] == 20


def test_a_queue_caught_at_both_ends_of_an_interval_but_empty_between_did_not_stand():
    """A port sending its senders' bursts at its rate, idle between them, with readings every half second in
    step with the bursts: the queue stood at both ends of every interval, at none of the readings between."""
    standing = int(BACKLOG_QUEUE_SHARE * LIMIT)
    bursts = samples({"tor-ocs": [0.2]}, cpu=[40.0] * 20, queue=standing).assign(backlog_min_bytes=0)
    judged = fidelity_summary(bursts, events([]), None)
    assert judged["verdict"] == "ok" and judged["links"]["tor-ocs"]["backlogged_intervals"] == 0
    stood = fidelity_summary(bursts.assign(backlog_min_bytes=standing), events([]), None)
    assert stood["verdict"] == "invalid" and stood["links"]["tor-ocs"]["backlogged_intervals"] == 20
    # a file from before the monitor read the queues between the ends is judged on the ends
    older = fidelity_summary(bursts.drop(columns="backlog_min_bytes"), events([]), None)
    assert older["links"]["tor-ocs"]["backlogged_intervals"] == 20


def test_a_busy_machine_and_late_circuits_are_named():
    launches = fidelity_summary(samples({"tor-eps": [1.0]}, cpu=[95.0] * 3 + [50.0] * 17), events([]), None)
    assert launches["verdict"] == "ok"  # a healthy run saturates the intervals in which waves of tasks start
    busy = fidelity_summary(samples({"tor-eps": [1.0]}, cpu=[95.0] * 3 + [50.0] * 7), events([]), None)
    assert busy["verdict"] == "warn" and busy["cpu_busy_share"] == 0.3 and busy["cpu_busy_worst_pct"] == 95.0
    saturated = fidelity_summary(samples({"tor-eps": [1.0]}, cpu=[95.0] * 6 + [50.0] * 4), events([]), None)
    assert saturated["verdict"] == "invalid"
    stalls = fidelity_summary(samples({}, cpu=[10.0]), events([11.0] * 17 + [41.7] * 3), None)
    assert stalls["verdict"] == "ok" and stalls["dark_time_ratio"]["p95"] > 4  # a few of Open vSwitch's stalls
    late = fidelity_summary(samples({}, cpu=[10.0]), events([11.0] * 14 + [25.0] * 6), None)
    assert late["verdict"] == "warn" and "dark time 2.5x" in late["reasons"][0]
    very_late = fidelity_summary(samples({}, cpu=[10.0]), events([11.0] * 14 + [97.0] * 6), None)
    assert very_late["verdict"] == "invalid"


def test_an_unchanged_or_emptied_configuration_has_no_dark_time():
    dark = events([12.0])
    emptied = dark.iloc[0].to_dict() | {
        "seq": 1,
        "circuits_before": dark.iloc[0].circuits_after,
        "circuits_after": "[]",
    }
    fidelity = fidelity_summary(samples({}, cpu=[10.0]), pd.DataFrame([dark.iloc[0].to_dict(), emptied]), None)
    assert fidelity["dark_time_ratio"]["count"] == 1 and fidelity["control_lag_ms"]["count"] == 2


def test_every_link_end_in_the_run_namespace_is_watched_at_its_rate():
    fabric = FabricSpec(racks=3, hosts_per_rack=2, host_rate_mbps=10, oversubscription=10, ocs_rate_mbps=20)
    ports = {p.interface: (p.link_class, p.configured_mbps) for p in shaped_ports(fabric)}
    assert ports["tor0-eth1"] == ("host", 10) and ports["tor2-eth2"] == ("host", 10)
    assert ports["tor1-eth3"] == ("tor-eps", 2) and ports["eps-eth2"] == ("tor-eps", 2)
    assert ports["tor1-eth4"] == ("tor-ocs", 20) and ports["ocs-eth2"] == ("tor-ocs", 20)
    assert len(ports) == 3 * (2 + 2 + 2)
    assert {p.link_class for p in shaped_ports(fabric.model_copy(update={"variant": "f-eps"}))} == {"host", "tor-eps"}


def test_the_root_qdisc_of_every_interface_is_read():
    tc = [
        {"kind": "htb", "handle": "5:", "dev": "tor0-eth3", "root": True, "bytes": 9000, "backlog": 3028, "drops": 2},
        {"kind": "pfifo", "handle": "10:", "dev": "tor0-eth3", "parent": "5:1", "bytes": 9000, "backlog": 3028},
        {"kind": "noqueue", "handle": "0:", "dev": "lo", "root": True, "bytes": 0, "backlog": 0, "drops": 0},
    ]
    counters = parse_qdiscs(json.dumps(tc))
    assert counters["tor0-eth3"].bytes_sent == 9000 and counters["tor0-eth3"].backlog_bytes == 3028
    assert counters["tor0-eth3"].drops == 2 and set(counters) == {"tor0-eth3", "lo"}


def test_tcp_counters_are_read_from_a_namespaces_snmp_and_netstat():
    snmp = (
        "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
        "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab "
        "InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
        "Tcp: 1 200 120000 -1 614 416 6 70 0 98503 57527 412 0 364 0\n"
        "Udp: InDatagrams NoPorts\nUdp: 5 0\n"
    )
    netstat = (
        "TcpExt: SyncookiesSent TCPSACKReorder TCPTSReorder TCPFastRetrans TCPTimeouts TCPDSACKRecv TCPSpuriousRTOs "
        "TCPSlowStartRetrans TCPLossProbes TCPRetransFail TCPSynRetrans\n"
        "TcpExt: 0 5 2 40 17 8 3 300 21 44 7\n"
        "IpExt: InNoRoutes InOctets\nIpExt: 0 123\n"
    )
    counters = tcp_counters(snmp, netstat)
    assert (counters["segments_sent"], counters["retransmitted"]) == (57527, 412)
    assert (counters["timeouts"], counters["spurious_timeouts"], counters["fast_retransmits"]) == (17, 3, 40)
    assert counters["reorderings"] == 7 and counters["dsacks_received"] == 8  # SACK and timestamp reorderings
    assert (counters["slow_start_retransmits"], counters["loss_probes"], counters["syn_retransmits"]) == (300, 21, 7)
    assert counters["retransmit_failures"] == 44
    mine = read_tcp_counters(os.getpid())  # this process's namespace has its counters too
    assert mine is not None and mine["segments_sent"] >= mine["retransmitted"] >= 0
    assert read_tcp_counters(2**22 + 1) is None  # beyond pid_max: no such process


def test_tcp_counters_are_reported_beside_the_verdict_and_do_not_change_it():
    healthy = samples({"tor-eps": [1.0]}, cpu=[40.0] * 20)
    fidelity = fidelity_summary(healthy, events([]), None, tcp={"segments_sent": 10_000, "retransmitted": 3123})
    assert fidelity["tcp"]["retransmitted_share"] == 0.3123 and fidelity["verdict"] == "ok"
    refused = {"segments_sent": 10_000, "retransmitted": 3123, "retransmit_failures": 3000}  # tries refused at home
    assert fidelity_summary(healthy, events([]), None, tcp=refused)["tcp"]["retransmitted_share"] == 0.0123
    assert fidelity_summary(healthy, events([]), None)["tcp"] is None


def test_task_throttling_is_summed_over_the_tasks_and_left_out_of_the_verdict():
    healthy = samples({"tor-eps": [1.0]}, cpu=[40.0] * 20)
    tasks = pd.DataFrame(
        {
            "start_s": [0.0, 1.0, 2.0],
            "finish_s": [10.0, 11.0, 32.0],
            "cpu_s": [0.5, 1.0, 3.5],
            "throttled_s": [0.0, 0.5, 2.5],
        }
    )
    fidelity = fidelity_summary(healthy, events([]), None, tasks=tasks)
    assert fidelity["verdict"] == "ok"
    assert fidelity["task_throttling"] == {
        "tasks": 2,
        "of_tasks": 3,
        "seconds": 3.0,
        "max_s": 2.5,
        "share_of_task_time": 0.06,  # 3 s of 50 task-seconds
        "cpu_s": 5.0,
        "cpu_cores_mean": 0.1,  # 5 CPU seconds over 50 task-seconds
    }
    before = fidelity_summary(healthy, events([]), None, tasks=tasks.drop(columns="cpu_s"))  # a run before cpu_s
    assert before["task_throttling"]["cpu_s"] is None and before["task_throttling"]["seconds"] == 3.0
    simulated = tasks.assign(throttled_s=float("nan"))  # tasks.csv's column is empty where nothing counted it
    assert fidelity_summary(healthy, events([]), None, tasks=simulated)["task_throttling"] is None
    assert fidelity_summary(healthy, events([]), None)["task_throttling"] is None


def test_packets_the_datapath_lost_are_counted_apart_from_queue_drops_and_judged():
    healthy = fidelity_summary(samples({"tor-eps": [1.0]}, cpu=[40.0] * 20, drops=30), events([]), None)
    assert healthy["datapath"] == {"received": 20_000, "sent": 19_400, "queue_drops": 600, "lost": 0, "lost_share": 0.0}
    assert healthy["verdict"] == "ok"
    noisy = fidelity_summary(samples({"tor-eps": [1.0]}, cpu=[40.0] * 20, drops=30, lost=2), events([]), None)
    assert noisy["datapath"]["lost_share"] == 0.002 and noisy["verdict"] == "ok"  # within the count's noise
    lossy = fidelity_summary(samples({"tor-eps": [1.0]}, cpu=[40.0] * 20, drops=30, lost=10), events([]), None)
    assert lossy["datapath"]["lost"] == 200 and lossy["datapath"]["lost_share"] == 0.01
    assert lossy["verdict"] == "warn" and "datapath lost 1.00%" in lossy["reasons"][0]
    starved = fidelity_summary(samples({"tor-eps": [1.0]}, cpu=[40.0] * 20, lost=47), events([]), None)
    assert starved["verdict"] == "invalid" and "datapath lost 4.70%" in starved["reasons"][0]


def test_a_forwarding_thread_that_waited_for_a_cpu_makes_a_run_warn_or_invalid():
    def judged(waits: list[float]) -> dict:
        return fidelity_summary(samples({"tor-eps": [1.0]}, cpu=[40.0] * 20, forwarding_wait=waits), events([]), None)

    contended = judged([0.02, 0.45] * 10)  # waits beside busy processes, none over half an interval
    assert contended["verdict"] == "ok" and contended["forwarding"]["starved_share"] == 0.0
    assert (
        contended["forwarding"]["wait_share"]["max"] == 0.45 and contended["forwarding"]["cpu_share"]["median"] == 0.3
    )
    stalled = judged([0.9] * 2 + [0.02] * 18)
    assert stalled["verdict"] == "warn" and "forwarding thread waited" in stalled["reasons"][0]
    assert "in 10% of intervals" in stalled["reasons"][0]
    starved = judged([0.7] * 6 + [0.02] * 14)  # a quota: 30 % of the intervals starved
    assert starved["verdict"] == "invalid" and starved["forwarding"]["starved_share"] == 0.3


def test_intervals_the_forwarding_thread_was_runnable_throughout_are_counted_whether_it_ran_or_waited():
    def forwarding(ran: list[float], waited: list[float]) -> dict:
        summary = fidelity_summary(
            samples({"tor-eps": [1.0]}, cpu=[40.0] * 20, forwarding_wait=waited, forwarding_cpu=ran), events([]), None
        )
        return summary["forwarding"]

    assert forwarding([0.3] * 20, [0.02, 0.45] * 10)["runnable_share"] == 0.0  # busy now and then, never throughout
    saturated = forwarding([0.97] * 5 + [0.5] * 15, [0.01] * 20)  # a core's worth of packets in a quarter
    assert saturated["runnable_share"] == 0.25 and saturated["starved_share"] == 0.0
    ready = forwarding([0.45] * 4 + [0.3] * 16, [0.5] * 4 + [0.02] * 16)  # ran half, waited the rest
    assert ready["runnable_share"] == 0.2 and ready["starved_share"] == 0.0


def test_packets_standing_inside_the_datapath_make_a_run_warn_or_invalid_though_its_links_look_healthy():
    def judged(held: list[int]) -> dict:
        return fidelity_summary(
            samples({"tor-eps": [1.0]}, cpu=[40.0] * 20, forwarding_wait=[0.02] * 20, datapath_backlog=held),
            events([]),
            None,
        )

    passing = judged([0] * 10 + [DATAPATH_BEHIND_BYTES - 1] * 10)  # frames caught in passing, below the bound
    assert passing["verdict"] == "ok" and passing["forwarding"]["behind_share"] == 0.0
    assert passing["forwarding"]["backlog_bytes"]["max"] == DATAPATH_BEHIND_BYTES - 1
    lagging = judged([DATAPATH_BEHIND_BYTES] * 2 + [0] * 18)
    assert lagging["verdict"] == "warn" and lagging["forwarding"]["behind_share"] == 0.1
    assert "waited inside the datapath" in lagging["reasons"][0] and "in 10% of intervals" in lagging["reasons"][0]
    behind = judged([400_000] * 12 + [0] * 8)  # the quickstart at 200-300 Mb/s hosts held 0.4-1.2 MB
    assert behind["verdict"] == "invalid" and behind["forwarding"]["behind_share"] == 0.6
    older = samples({"tor-eps": [1.0]}, cpu=[40.0] * 20, forwarding_wait=[0.02] * 20)
    older = older.drop(columns="forwarding_backlog_min_bytes")  # files from before the monitor read the sockets
    unread = fidelity_summary(older, events([]), None)["forwarding"]
    assert unread["behind_share"] is None and unread["backlog_bytes"] is None and unread["starved_share"] == 0.0


def test_the_bytes_waiting_in_packet_sockets_are_summed_from_proc_net_packet():
    text = (
        "sk               RefCnt Type Proto  Iface R Rmem   User   Inode\n"
        "000000000599c8d9 3      3    0003   10    1 0      0      847128713\n"
        "00000000134f0c90 3      3    0003   16    1 4608   0      847128716\n"
        "000000005c3feacd 3      3    0000   0     1 2304   0      847128718\n"
    )
    assert queued_packet_bytes(text) == 6912
    assert queued_packet_bytes(text.splitlines()[0]) == 0  # no sockets
    assert queued_packet_bytes(Path("/proc/thread-self/net/packet").read_text()) >= 0  # the kernel's own format


def test_a_kernel_datapath_or_older_samples_leave_the_forwarding_thread_unjudged():
    unwatched = fidelity_summary(samples({"tor-eps": [1.0]}, cpu=[40.0] * 20), events([]), None)
    assert unwatched["forwarding"] is None and unwatched["verdict"] == "ok"
    older = samples({"tor-eps": [1.0]}, cpu=[40.0] * 20).drop(columns=["forwarding_cpu_share", "forwarding_wait_share"])
    assert fidelity_summary(older, events([]), None)["forwarding"] is None


def test_samples_from_before_packet_counts_leave_the_datapath_unjudged():
    old = samples({"tor-eps": [1.0]}, cpu=[40.0] * 20).drop(columns=["received_packets", "sent_packets"])
    fidelity = fidelity_summary(old, events([]), None)
    assert fidelity["datapath"] is None and fidelity["verdict"] == "ok"


def test_packets_per_port_are_read_from_proc_net_dev():
    text = (
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls "
        "carrier compressed\n"
        "    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0 "
        "      0          0\n"
        "tor0-eth3: 1514000 1000    0    0    0     0          0         0  757000     500    0    0    0     0 "
        "      0          0\n"
    )
    ports = parse_net_dev(text)
    assert (ports["tor0-eth3"].received, ports["tor0-eth3"].sent) == (1000, 500) and set(ports) == {"lo", "tor0-eth3"}
    assert "lo" in parse_net_dev(Path("/proc/thread-self/net/dev").read_text())


def test_the_datapath_send_buffer_holds_every_shaped_switch_queue_full():
    fabric = FabricSpec(racks=3, hosts_per_rack=2, host_rate_mbps=10, oversubscription=10, ocs_rate_mbps=20)
    ports = shaped_ports(fabric)
    assert datapath_send_buffer_bytes(ports, userspace_tso=False) == 18 * 32 * FRAME_TRUESIZE_BYTES
    fast = shaped_ports(fabric.model_copy(update={"host_rate_mbps": 100, "ocs_rate_mbps": 200}))
    assert queue_packets(200) == 165 and datapath_send_buffer_bytes(fast, False) > 18 * 32 * FRAME_TRUESIZE_BYTES
    assert datapath_send_buffer_bytes(ports, userspace_tso=True) > 16 * datapath_send_buffer_bytes(ports, False)


def test_the_datapaths_send_socket_is_the_unbound_raw_packet_socket():
    listing = (
        "sk               RefCnt Type Proto  Iface R Rmem   User   Inode\n"
        "0000000016ad21b3 3      3    0003   14    1 0      0      206487281\n"  # a port's receive socket
        "00000000a1b2c3d4 2      3    0000   0     0 0      0      206512378\n"  # the send socket
        "00000000deadbeef 2      2    0000   0     0 0      0      206512999\n"  # a datagram packet socket
    )
    assert unbound_packet_sockets(listing) == {"206512378"}
    assert unbound_packet_sockets(listing.splitlines()[0]) == set()
