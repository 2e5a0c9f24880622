"""Timer-driven retransmissions read off a host's packet capture (results/tcp_stalls.py), on captures written
here packet by packet, cut to the headers as the run's captures are."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path

import dpkt
import pandas as pd
import pytest

from hybridbed.cli import main
from hybridbed.results.tcp_stalls import (
    SEQ_SPACE,
    TCP_RTO_MIN_S,
    flow_connections,
    host_stalls,
    path_waits,
    reducer_waits,
    run_stalls,
)
from hybridbed.testbed.capture import SNAPLEN_BYTES

SERVER, CLIENT = "10.0.0.1", "10.0.1.1"
MSS = 1448


def frame(
    src: str, dst: str, sport: int, dport: int, seq: int, payload: int, ack: int = 0, flags: int = dpkt.tcp.TH_ACK
) -> bytes:
    tcp = dpkt.tcp.TCP(
        sport=sport, dport=dport, seq=seq % SEQ_SPACE, ack=ack % SEQ_SPACE, flags=flags, data=b"x" * payload
    )
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_TCP, data=tcp)
    ip.len = len(ip)
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, data=ip))


def write_capture(path: Path, packets: list[tuple[float, bytes]]) -> None:
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f, snaplen=SNAPLEN_BYTES)
        for t, packet in packets:
            writer.writepkt(packet[:SNAPLEN_BYTES], ts=t)


def fetch(first_seq: int, sport: int = 40000, lost_again: bool = False) -> list[tuple[float, bytes]]:
    """A client's request, three segments back, a duplicate ACK answered at once by a fast retransmission of the
    second, then 1.2 s of silence and the third again (its timer); `lost_again`: that copy is lost too, and the
    timer, backed off, sends it again 2.4 s later."""
    served = (SERVER, CLIENT, 7070, sport)
    third_again = [(1.2502, frame(*served, first_seq + 2 * MSS, MSS))]  # its timer: nothing came for 1.2 s
    if lost_again:
        third_again.append((3.6502, frame(*served, first_seq + 2 * MSS, MSS)))
    return [
        (0.000, frame(CLIENT, SERVER, sport, 7070, 5000, 60)),  # the request line
        (0.010, frame(*served, first_seq, MSS)),
        (0.011, frame(*served, first_seq + MSS, MSS)),
        (0.012, frame(*served, first_seq + 2 * MSS, MSS)),
        (0.050, frame(CLIENT, SERVER, sport, 7070, 5060, 0, ack=first_seq + MSS)),
        (0.0502, frame(*served, first_seq + MSS, MSS)),  # fast retransmission: triggered by the ACK
        *third_again,
        (3.700 if lost_again else 1.300, frame(CLIENT, SERVER, sport, 7070, 5060, 0, ack=first_seq + 3 * MSS)),
    ]


@pytest.mark.parametrize("first_seq", [1000, SEQ_SPACE - MSS - 10])  # the second wraps the sequence space
def test_only_the_retransmission_after_a_silence_is_timer_driven(tmp_path, first_seq):
    write_capture(tmp_path / "h.pcap", fetch(first_seq))
    stalls = host_stalls(tmp_path / "h.pcap", SERVER)
    assert stalls.connections == 1
    assert stalls.silences_s == pytest.approx([1.2])
    assert stalls.connection_s == pytest.approx(1.3)
    summary = stalls.summary()
    assert summary["timer_retransmissions"] == 1 and summary["timer_silence_share"] == pytest.approx(1.2 / 1.3, 1e-3)
    assert summary["timer_backed_off_share"] == 0


def test_a_wait_counts_as_backed_off_only_when_it_began_at_the_timers_last_retransmission(tmp_path):
    served, first_seq = (SERVER, CLIENT, 7070, 40000), 1000
    packets = [
        *fetch(first_seq, lost_again=True),
        (3.710, frame(*served, first_seq + 3 * MSS, MSS)),
        (4.910, frame(*served, first_seq + 3 * MSS, MSS)),  # a new loss: its silence began at a new segment
        (4.950, frame(CLIENT, SERVER, 40000, 7070, 5060, 0, ack=first_seq + 4 * MSS)),
    ]
    write_capture(tmp_path / "h.pcap", packets)
    stalls = host_stalls(tmp_path / "h.pcap", SERVER)
    assert stalls.silences_s == pytest.approx([1.2, 2.4, 1.2])
    assert stalls.backed_off_s == pytest.approx([2.4])
    assert stalls.summary()["timer_backed_off_share"] == pytest.approx(0.5, 1e-3)


def test_a_capture_cut_short_in_its_last_record_keeps_every_packet_before_it(tmp_path):
    """A capture ended mid-write (tcpdump killed, a further server's stream cut with its ssh session): its last
    record, the client's final acknowledgement, is cut anywhere, header or frame; the timer's wait before it
    is read all the same."""
    write_capture(tmp_path / "whole.pcap", fetch(1000))
    whole = (tmp_path / "whole.pcap").read_bytes()
    last_record = 16 + len(fetch(1000)[-1][1])  # pcap's record header, then the frame
    for kept in range(1, last_record):
        (tmp_path / "cut.pcap").write_bytes(whole[: len(whole) - last_record + kept])
        stalls = host_stalls(tmp_path / "cut.pcap", SERVER)
        assert stalls.connections == 1 and stalls.silences_s == pytest.approx([1.2]), kept


def test_a_connection_counts_at_the_host_that_sent_its_data_not_the_one_that_asked(tmp_path):
    write_capture(tmp_path / "h.pcap", fetch(1000))
    assert host_stalls(tmp_path / "h.pcap", CLIENT).connections == 0


def test_a_silence_shorter_than_the_shortest_timeout_is_not_counted(tmp_path):
    packets = fetch(1000)
    _, last = packets[-2]
    packets[-2] = (0.0502 + TCP_RTO_MIN_S / 2, last)  # a retransmission after 0.1 s: no RTO fires that soon
    write_capture(tmp_path / "h.pcap", packets)
    assert host_stalls(tmp_path / "h.pcap", SERVER).silences_s == []


def test_a_run_sums_its_hosts(tmp_path):
    write_capture(tmp_path / "a.pcap", fetch(1000))
    write_capture(tmp_path / "b.pcap", fetch(1000, sport=40001) + [(2.0, frame(SERVER, CLIENT, 7070, 1, 0, MSS))])
    stalls = run_stalls(tmp_path, {"a": SERVER, "b": SERVER})
    assert stalls.connections == 3 and stalls.silences_s == pytest.approx([1.2, 1.2])


def test_ports_taken_again_by_a_new_connection_start_its_sequence_afresh(tmp_path):
    again = [(2.0 + t, packet) for t, packet in fetch(1000 + MSS)]  # the same ports, inside the last sequence
    syn = frame(CLIENT, SERVER, 40000, 7070, 4999, 0, flags=dpkt.tcp.TH_SYN)
    write_capture(tmp_path / "h.pcap", [*fetch(1000), (1.99, syn), *again])
    stalls = host_stalls(tmp_path / "h.pcap", SERVER)
    assert stalls.connections == 2 and stalls.silences_s == pytest.approx([1.2, 1.2])


def test_a_syn_ack_sent_again_after_the_request_does_not_split_the_connection(tmp_path):
    packets = fetch(1000)
    synack = frame(SERVER, CLIENT, 7070, 40000, 999, 0, ack=5000, flags=dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)
    packets.insert(2, (0.005, synack))  # the server's, again: the client's ACK of it was lost
    write_capture(tmp_path / "h.pcap", packets)
    write_capture(tmp_path / "c.pcap", packets)  # the client's capture sees the same packets
    assert host_stalls(tmp_path / "h.pcap", SERVER).connections == 1
    assert host_stalls(tmp_path / "c.pcap", CLIENT).connections == 0


def captured_run(tmp_path: Path) -> Path:
    """A run of three hosts: a served b three fetches, two of which waited for a timer, overlapping (the second
    twice, backed off), over the EPS, and one over a circuit without a wait, and a fourth, killed, that flows.csv
    has no row for; c's fetch was not captured, and b read from itself."""
    origin = 100.0
    (tmp_path / "pcap").mkdir()
    hosts = [{"name": "a", "ip": SERVER}, {"name": "b", "ip": CLIENT}, {"name": "c", "ip": "10.0.2.1"}]
    (tmp_path / "cluster.json").write_text(json.dumps({"hosts": hosts}))
    (tmp_path / "summary.json").write_text(json.dumps({"started_at_unix": origin}))
    waited = [(origin + t, p) for t, p in fetch(1000)]  # waits 1.2 s from 0.05 s
    waited_too = [(origin + 0.5 + t, p) for t, p in fetch(1000, 40001, lost_again=True)]  # from 0.55 s, 3.6 s
    clean = [(origin + 3 + t, p) for t, p in fetch(1000, sport=40002)[:6]]  # no timer
    killed = [(origin + 2 + t, p) for t, p in fetch(1000, sport=40003)]  # waits too, but belongs to no row
    write_capture(tmp_path / "pcap" / "a.pcap", sorted(waited + waited_too + clean + killed))
    write_capture(tmp_path / "pcap" / "b.pcap", [])
    write_capture(tmp_path / "pcap" / "c.pcap", [])
    pd.DataFrame(
        [
            ("r0", 0, "shuffle", "a", "b", 0.0, "eps"),
            ("r0", 0, "shuffle", "a", "b", 0.5, "eps"),
            ("r1", 0, "shuffle", "a", "b", 3.0, "ocs"),
            ("r2", 0, "shuffle", "c", "b", 1.0, "eps"),  # its connection was not captured: cannot be paired
            ("r1", 0, "shuffle", "b", "b", 3.0, "rack"),  # from its own host: no connection
        ],
        columns=["task_id", "attempt", "kind", "src_host", "dst_host", "start_s", "path"],
    ).to_csv(tmp_path / "flows.csv", index=False)
    return tmp_path


def test_a_reducers_wait_is_the_time_any_of_its_connections_waited(tmp_path):
    waits = reducer_waits(flow_connections(captured_run(tmp_path), tmp_path / "pcap"))
    assert waits[("r0", 0)] == pytest.approx(4.1)  # 0.05-1.25 and 0.55-4.15 s together
    assert waits[("r1", 0)] == 0.0 and math.isnan(waits[("r2", 0)])


def test_the_waits_are_split_by_the_path_their_connections_took(tmp_path):
    table = path_waits(flow_connections(captured_run(tmp_path), tmp_path / "pcap"))
    assert list(table.index) == [("shuffle", "eps"), ("shuffle", "ocs")]  # the unpaired one is left out
    eps, ocs = table.loc[("shuffle", "eps")], table.loc[("shuffle", "ocs")]
    assert eps.connections == 2 and eps.timer_waits == 3
    assert eps.timer_silence_s == pytest.approx(4.8) and eps.connection_s == pytest.approx(1.3 + 3.7)
    assert eps.timer_silence_share == pytest.approx(4.8 / 5.0) and eps.timer_backed_off_share == pytest.approx(0.5)
    assert ocs.connections == 1 and ocs.timer_waits == 0 and ocs.timer_silence_share == 0.0


@pytest.mark.parametrize("waits", [0, 3])
def test_the_run_command_tells_a_captured_runs_timer_waits_only_when_there_were_some(
    monkeypatch, tmp_path, capsys, waits
):
    stalls = {"connections": 6, "timer_retransmissions": waits, "timer_silence_share": 0.05, "timer_silence_max_s": 1.5}
    summary = {"makespan_s": 1.0, "jct_median_s": 1.0, "jct_p95_s": 1.0}
    summary["fidelity"] = {"verdict": "ok", "reasons": [], "tcp_timer_stalls": stalls}
    monkeypatch.setattr("hybridbed.experiments.backends.run_backend", lambda *args: summary)
    quickstart = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
    assert main(["run", str(quickstart), "--backend", "simulation", "--out", str(tmp_path / "r")]) == 0
    told = " ".join(capsys.readouterr().err.split())
    assert ("6 connections waited for a retransmission timer 3 times, 5.0% of their time" in told) == bool(waits)
