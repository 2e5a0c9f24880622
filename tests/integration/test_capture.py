"""`--capture-packets`: every host's TCP headers land in the run's pcap/, and the summary reads every data
connection of the run off them."""

from __future__ import annotations

from .conftest import check_captures, run_cli


def test_a_captured_run_has_a_pcap_per_host_and_its_stalls_count_every_connection(
    tmp_path, small_scenario, scenario_file
):
    path = scenario_file(small_scenario(jobs=2))
    out = tmp_path / "run"
    proc = run_cli("run", str(path), "--out", str(out), "--capture-packets")
    assert proc.returncode == 0, proc.stderr[-2000:]
    _, stalls = check_captures(out)
    assert 0 <= stalls["timer_silence_share"] < 1
    told = "waited for a retransmission timer" in " ".join(proc.stderr.split())  # the console wraps lines
    assert told == (stalls["timer_retransmissions"] > 0)
