"""Does a ToR's OCS port drain its queue at its rate? The GENI runs' verdicts found ToR-to-OCS ports holding a
growing queue for seconds while they sent a fifth of their rate (docs/reproductions.md, the GENI mixed scenario
emulated); this bench looks for that on a small fabric. It lights rack 0's circuit to rack 1 (10 Mb/s, hosts at
10 Mb/s, a 1 Mb/s EPS), sends two TCP flows paced at 1 Mb/s over it (the GENI task cap), fills the EPS back path
their acknowledgements take with a third flow, and reads the OCS port's queue every SAMPLE_S. Per phase it
prints how often a queue was held, and every stretch in which a queue stood at each sample for MIN_EPISODE_S or
longer, with what the port sent meanwhile (a port that drains at its rate sends at it while its queue stands).
Phases: HTB's `cburst` as the fabric sets it or at a value given, alone or beside CPU-bound processes.

Runs the emulation, so as root; about a minute per phase:
    .venv/bin/python bench/ocs_port_drain.py [--seconds 40] [--phases fabric:0,fabric:2,3028:2]
    (a phase is CBURST:HOGS; CBURST `fabric` keeps the port's class as built, a number sets it in bytes)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass

from hybridbed.config.fabric import FRAME_BYTES, FabricSpec, OcsSpec
from hybridbed.testbed.network import HybridNetwork
from hybridbed.testbed.shaping import burst_bytes

SAMPLE_S = 0.02  # between two reads of the port's queue
MIN_EPISODE_S = 0.1  # a queue held this long drains at 10 Mb/s only if the port sends at its rate
PACED_MBPS = 1  # each circuit flow's rate: the GENI scenarios' per-task cap
FABRIC = FabricSpec(racks=2, hosts_per_rack=1, host_rate_mbps=10, eps_rate_mbps=1, ocs_rate_mbps=10)
IPERF_PORTS = (5001, 5002, 5003)  # the two paced circuit flows, then the one that fills the EPS back path


@dataclass(frozen=True)
class Sample:
    at: float  # monotonic seconds
    sent_bytes: int
    backlog_bytes: int


def read_port(dev: str) -> Sample:
    """The port's root qdisc (HTB sums its child's counters)."""
    out = subprocess.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], capture_output=True, text=True, check=True)
    root = next(q for q in json.loads(out.stdout) if q.get("root"))
    return Sample(time.monotonic(), root["bytes"], root["backlog"])


def set_cburst(dev: str, cburst: str) -> str:
    """Give the port's HTB class this cburst (`fabric`: as built); returns the class as tc shows it."""
    if cburst != "fabric":
        rate = FABRIC.ocs_rate_mbps
        subprocess.run(
            ["tc", "class", "change", "dev", dev, "parent", "5:0", "classid", "5:1", "htb", "rate", f"{rate:g}Mbit",
             "burst", str(burst_bytes(rate)), "cburst", cburst, "quantum", str(FRAME_BYTES)],
            check=True,
        )  # fmt: skip
    return subprocess.run(["tc", "-d", "class", "show", "dev", dev], capture_output=True, text=True).stdout.strip()


def sample_under_load(net: HybridNetwork, dev: str, seconds: float) -> list[Sample]:
    """The port's queue every SAMPLE_S for `seconds`, while the flows run (they are ended here, by pid)."""
    src, dst = net.host(0, 0), net.host(1, 0)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    receivers = [dst.popen(["iperf", "-s", "-p", str(p)], **quiet) for p in IPERF_PORTS[:2]]
    receivers.append(src.popen(["iperf", "-s", "-p", str(IPERF_PORTS[2])], **quiet))
    procs = list(receivers)
    try:
        time.sleep(1.0)  # the receivers listen
        duration = str(int(seconds) + 3)
        for port in IPERF_PORTS[:2]:
            cmd = ["iperf", "-c", dst.IP(), "-p", str(port), "-b", f"{PACED_MBPS}M", "-t", duration]
            procs.append(src.popen(cmd, **quiet))
        procs.append(dst.popen(["iperf", "-c", src.IP(), "-p", str(IPERF_PORTS[2]), "-t", duration], **quiet))
        time.sleep(2.0)  # past slow start
        samples = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            samples.append(read_port(dev))
            time.sleep(SAMPLE_S)
        return samples
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def episodes(samples: list[Sample]) -> list[tuple[Sample, Sample, int]]:
    """Stretches with a queue at every sample for MIN_EPISODE_S or more: first and last sample, deepest queue."""
    found, start = [], None
    for i, sample in enumerate([*samples, Sample(0.0, 0, 0)]):  # a last empty sample closes an open stretch
        if sample.backlog_bytes > 0 and start is None:
            start = i
        elif sample.backlog_bytes == 0 and start is not None:
            first, last = samples[start], samples[i - 1]
            if last.at - first.at >= MIN_EPISODE_S:
                found.append((first, last, max(s.backlog_bytes for s in samples[start:i])))
            start = None
    return found


def report(phase: str, samples: list[Sample]) -> None:
    span = samples[-1].at - samples[0].at
    mbps = (samples[-1].sent_bytes - samples[0].sent_bytes) * 8 / span / 1e6
    held = sum(s.backlog_bytes > 0 for s in samples) / len(samples)
    stretches = episodes(samples)
    print(f"phase {phase}: {len(samples)} samples over {span:.1f} s; the port sent {mbps:.2f} Mb/s; a queue in "
          f"{held:.1%} of the samples; {len(stretches)} stretches of {MIN_EPISODE_S:g} s or more")  # fmt: skip
    for first, last, deepest in stretches:
        seconds = last.at - first.at
        rate = (last.sent_bytes - first.sent_bytes) * 8 / seconds / 1e6
        print(f"  {seconds:.2f} s sending {rate:.2f} Mb/s of {FABRIC.ocs_rate_mbps:g}, queue up to {deepest} B")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="sampled seconds per phase")
    parser.add_argument("--phases", default="fabric:0,fabric:2,3028:2", help="CBURST:HOGS, comma-separated")
    args = parser.parse_args()
    phases = [phase.split(":") for phase in args.phases.split(",")]
    for phase in phases:
        if len(phase) != 2 or not phase[1].isdigit() or not (phase[0] == "fabric" or phase[0].isdigit()):
            parser.error(f"--phases: {':'.join(phase)!r} is not CBURST:HOGS (CBURST `fabric` or bytes, HOGS a count)")
    with HybridNetwork(FABRIC, OcsSpec(reconfig_delay_ms=10)) as net:
        net.controller.set_circuits([{"src_rack": 0, "dst_rack": 1}])
        dev = f"{net.plan.tor_name(0)}-eth{net.plan.tor_ocs_port(0)}"
        for cburst, hogs in phases:
            print(set_cburst(dev, cburst))
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(int(hogs))]
            try:
                report(f"{cburst}:{hogs}", sample_under_load(net, dev, args.seconds))
            finally:
                for proc in busy:
                    proc.kill()
                    proc.wait()


if __name__ == "__main__":
    main()
