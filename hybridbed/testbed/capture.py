"""Packet captures of an emulated run: tcpdump in every host's namespace, TCP headers only, one pcap per host.

A capture shows what the run's counters cannot: which segments a connection lost, when it sent them again
and what made it (results/tcp_stalls.py reads the timer-driven retransmissions off them). tcpdump writes each
packet to its standard output as it comes (-U), and that output is the pcap file on this machine: a host on a
further server streams its packets over its ssh session (remote.py) into this run's directory like any
other. So what a run captured survives the run's end, however it ends; the captures are processes of the
run like its workers, recorded for cleanup and ended by pid.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from hybridbed.testbed.network import HybridNetwork

SNAPLEN_BYTES = 128  # Ethernet, IP and TCP headers with every option; the payload is the model's, not news
PCAP_HEADER_BYTES = 24  # a pcap file's global header: written once tcpdump captures
START_TIMEOUT_S = 10.0
CAPTURE_DIR = "pcap"


class CaptureError(RuntimeError):
    """A capture could not start (tcpdump missing, or silent)."""


def capture_missing() -> str | None:
    """Why captures cannot run on this machine, or None."""
    if shutil.which("tcpdump") is None:
        return "capture_packets: tcpdump is not installed (setup.sh installs it)"
    return None


def start_captures(net: HybridNetwork, out_dir: Path, captures: list[subprocess.Popen]) -> None:
    """One tcpdump per host on its interface, into <out_dir>/pcap/<host>.pcap, each added to `captures` and
    the run's record as it starts (so a failure part way still stops those started); returns once every one
    is capturing."""
    directory = out_dir / CAPTURE_DIR
    directory.mkdir()
    files = []
    for address in net.plan.hosts():
        host = net.net.get(address.name)
        path = directory / f"{address.name}.pcap"
        command = ["tcpdump", "-U", "-n", "-s", str(SNAPLEN_BYTES), "-i", host.defaultIntf().name, "-w", "-", "tcp"]
        with path.open("wb") as pcap:  # the child holds it open
            proc = host.popen(command, stdout=pcap, stderr=subprocess.DEVNULL)
        captures.append(proc)
        net.record.add_process(proc.pid, f"capture {address.name}")
        files.append((path, proc))
    deadline = time.monotonic() + START_TIMEOUT_S
    for path, proc in files:
        while not (path.exists() and path.stat().st_size >= PCAP_HEADER_BYTES):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise CaptureError(f"capture_packets: tcpdump did not start capturing into {path}")
            time.sleep(0.05)
