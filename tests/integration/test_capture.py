"""`--capture-packets`: every host's TCP headers land in the run's pcap/, and the summary reads every data
connection of the run off them."""

from __future__ import annotations

import json

import dpkt
import pandas as pd

from hybridbed.testbed.capture import PCAP_HEADER_BYTES

from .conftest import run_cli


def test_a_captured_run_has_a_pcap_per_host_and_its_stalls_count_every_connection(
    tmp_path, small_scenario, scenario_file
):
    path = scenario_file(small_scenario(jobs=2))
    out = tmp_path / "run"
    proc = run_cli("run", str(path), "--out", str(out), "--capture-packets")
    assert proc.returncode == 0, proc.stderr[-2000:]
    hosts = json.loads((out / "cluster.json").read_text())["hosts"]
    flows = pd.read_csv(out / "flows.csv")
    remote = flows[flows.src_host != flows.dst_host]  # a fetch from another host: one TCP connection each
    assert len(remote) > 0
    for host in hosts:
        pcap = out / "pcap" / f"{host['name']}.pcap"
        assert pcap.stat().st_size >= PCAP_HEADER_BYTES
        with pcap.open("rb") as f:
            captured = sum(1 for _ in dpkt.pcap.Reader(f))
        sent_or_fetched = remote.src_host.eq(host["name"]).any() or remote.dst_host.eq(host["name"]).any()
        assert (captured > 0) == sent_or_fetched, host["name"]
    stalls = json.loads((out / "summary.json").read_text())["fidelity"]["tcp_timer_stalls"]
    assert stalls["connections"] == len(remote)
    assert 0 <= stalls["timer_silence_share"] < 1
    told = "waited for a retransmission timer" in " ".join(proc.stderr.split())  # the console wraps lines
    assert told == (stalls["timer_retransmissions"] > 0)
