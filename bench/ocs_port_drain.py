"""Do ToRs' OCS ports drain their queues at their rate? Read every 0.5 s alone, the GENI runs' ToR-to-OCS ports
seemed to hold a growing queue for seconds while they sent a fifth of their rate: bursts caught at the readings'
instants (docs/network.md, "Reading the fidelity verdict"). This bench measures the drain on the GENI fabric's links
(scenarios/jobpacker-geni.yaml: one host per rack at 10 Mb/s, 10 Mb/s circuits, a 1 Mb/s EPS). It lights
circuits (rack 0 to 1 on two racks; a ring, each rack to the next, on more), sends two TCP flows paced at the
scenario's task cap (1 Mb/s) over each, fills the EPS back path their acknowledgements take with an unpaced flow
the other way, and reads the circuits' ToR ports every --sample-s. Per phase it prints how
often a port held a queue, the stretches in which its queue stood at each sample for MIN_EPISODE_S or longer and
the least any of them sent (a port that drains at its rate sends at it while its queue stands), and lists those
that sent less than SLOW_SHARE of the rate.
Phases: HTB's `cburst` as the fabric sets it or at a value given, alone or beside CPU-bound processes.

Runs the emulation, so as root; about a minute per phase:
    .venv/bin/python bench/ocs_port_drain.py [--racks 2] [--seconds 40] [--sample-s 0.02]
                                             [--phases fabric:0,fabric:2,3028:2]
    (a phase is CBURST:HOGS; CBURST `fabric` keeps the ports' class as built, a number sets it in bytes)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hybridbed.config.fabric import FRAME_BYTES, OcsSpec
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.testbed.fidelity_monitor import QdiscCounters, QdiscReader
from hybridbed.testbed.network import HybridNetwork
from hybridbed.testbed.shaping import burst_bytes

GENI = Path(__file__).resolve().parents[1] / "scenarios" / "jobpacker-geni.yaml"  # its links and task cap
MIN_EPISODE_S = 0.1  # a queue held this long drains at 10 Mb/s only if the port sends at its rate
PACED_PER_CIRCUIT = 2  # flows at the task cap per circuit
SLOW_SHARE = 0.5  # a stretch sending less than this share of the port's rate is listed on its own
FIRST_PORT = 5001  # iperf's ports, one per flow


def circuits(racks: int) -> list[tuple[int, int]]:
    """Rack 0 to 1 on two racks (the way back stays on the EPS); each rack to the next on more."""
    return [(0, 1)] if racks == 2 else [(rack, (rack + 1) % racks) for rack in range(racks)]


@dataclass(frozen=True)
class Sample:
    at: float  # monotonic seconds
    port: QdiscCounters


def read_ports(qdiscs: QdiscReader, devs: list[str]) -> dict[str, Sample]:
    """Each port's root qdisc counters, from one reading for them all (as the run's fidelity monitor reads them)."""
    roots, now = qdiscs.read(), time.monotonic()
    if not roots:
        raise RuntimeError("tc read no qdisc (see `tc -s -j qdisc show`)")
    return {dev: Sample(now, roots[dev]) for dev in devs}


def set_cburst(devs: list[str], cburst: str, rate_mbps: float) -> str:
    """Give the ports' HTB class this cburst (`fabric`: as built); returns the first port's class as tc shows it."""
    for dev in devs if cburst != "fabric" else []:
        subprocess.run(
            ["tc", "class", "change", "dev", dev, "parent", "5:0", "classid", "5:1", "htb", "rate", f"{rate_mbps:g}Mbit",
             "burst", str(burst_bytes(rate_mbps)), "cburst", cburst, "quantum", str(FRAME_BYTES)],
            check=True,
        )  # fmt: skip
    return subprocess.run(["tc", "-d", "class", "show", "dev", devs[0]], capture_output=True, text=True).stdout.strip()


def sample_under_load(
    net: HybridNetwork, devs: list[str], paced_mbps: float, seconds: float, every_s: float
) -> list[dict[str, Sample]]:
    """The ports' queues every `every_s` for `seconds`, while the flows run (they are ended here, by pid)."""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    qdiscs = QdiscReader()
    flows = []  # (sender, receiver, iperf options)
    for a, b in circuits(net.fabric.racks):
        flows += [(net.host(a, 0), net.host(b, 0), ["-b", f"{paced_mbps:g}M"])] * PACED_PER_CIRCUIT
        flows.append((net.host(b, 0), net.host(a, 0), []))  # over the EPS: the circuit flows' way back
    procs = [
        receiver.popen(["iperf", "-s", "-p", str(FIRST_PORT + i)], **quiet) for i, (_, receiver, _) in enumerate(flows)
    ]
    try:
        time.sleep(1.0)  # the receivers listen
        duration = str(int(seconds) + 3)
        for i, (sender, receiver, options) in enumerate(flows):
            cmd = ["iperf", "-c", receiver.IP(), "-p", str(FIRST_PORT + i), *options, "-t", duration]
            procs.append(sender.popen(cmd, **quiet))
        time.sleep(2.0)  # past slow start
        samples = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            samples.append(read_ports(qdiscs, devs))
            time.sleep(every_s)
        return samples
    finally:
        qdiscs.close()
        for proc in procs:
            proc.kill()
            proc.wait()


def episodes(samples: list[Sample]) -> list[tuple[Sample, Sample, int]]:
    """Stretches with a queue at every sample for MIN_EPISODE_S or more: first and last sample, deepest queue."""
    found, start = [], None
    empty = Sample(0.0, QdiscCounters(0, 0, 0))  # a last empty sample closes an open stretch
    for i, sample in enumerate([*samples, empty]):
        if sample.port.backlog_bytes > 0 and start is None:
            start = i
        elif sample.port.backlog_bytes == 0 and start is not None:
            first, last = samples[start], samples[i - 1]
            if last.at - first.at >= MIN_EPISODE_S:
                found.append((first, last, max(s.port.backlog_bytes for s in samples[start:i])))
            start = None
    return found


def mbps_between(first: Sample, last: Sample) -> float:
    return (last.port.bytes_sent - first.port.bytes_sent) * 8 / (last.at - first.at) / 1e6


def report(phase: str, samples: list[dict[str, Sample]], rate_mbps: float) -> None:
    print(f"phase {phase}: {len(samples)} samples of {len(samples[0])} ports")
    for dev in samples[0]:
        series = [sample[dev] for sample in samples]
        held = sum(s.port.backlog_bytes > 0 for s in series) / len(series)
        stretches = [(first, last, deepest, mbps_between(first, last)) for first, last, deepest in episodes(series)]
        slowest = f", the slowest sending {min(s[3] for s in stretches):.2f} Mb/s of {rate_mbps:g}" if stretches else ""
        print(
            f"  {dev}: sent {mbps_between(series[0], series[-1]):.2f} Mb/s over {series[-1].at - series[0].at:.1f} s, "
            f"a queue in {held:.1%} of the samples, {len(stretches)} stretches of {MIN_EPISODE_S:g} s or more{slowest}"
        )
        for first, last, deepest, mbps in stretches:
            if mbps < SLOW_SHARE * rate_mbps:
                print(f"    {last.at - first.at:.2f} s sending {mbps:.2f} Mb/s, queue up to {deepest} B")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--racks", type=int, default=2, help="racks of one host (2 or more)")
    parser.add_argument("--seconds", type=float, default=40.0, help="sampled seconds per phase")
    parser.add_argument("--sample-s", type=float, default=0.02, help="seconds between reads of the ports")
    parser.add_argument("--phases", default="fabric:0,fabric:2,3028:2", help="CBURST:HOGS, comma-separated")
    args = parser.parse_args()
    if args.racks < 2:
        parser.error(f"--racks: at least 2 (got {args.racks})")
    phases = [phase.split(":") for phase in args.phases.split(",")]
    for phase in phases:
        if len(phase) != 2 or not phase[1].isdigit() or not (phase[0] == "fabric" or phase[0].isdigit()):
            parser.error(f"--phases: {':'.join(phase)!r} is not CBURST:HOGS (CBURST `fabric` or bytes, HOGS a count)")
    geni = load_scenario(GENI, {"fabric.racks": args.racks})
    spec, cap_mbps = geni.fabric, geni.workers.task_rate_cap_mbps
    assert spec.hosts_per_rack == 1 and cap_mbps is not None, "the GENI scenario: one host per rack, a task cap"
    with HybridNetwork(spec, OcsSpec(reconfig_delay_ms=geni.ocs.reconfig_delay_ms)) as net:
        net.controller.set_circuits([{"src_rack": a, "dst_rack": b} for a, b in circuits(args.racks)])
        devs = [
            net.plan.port_interface(net.plan.tor_name(a), net.plan.tor_ocs_port(0)) for a, _ in circuits(args.racks)
        ]
        for cburst, hogs in phases:
            print(set_cburst(devs, cburst, spec.ocs_rate_mbps))
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(int(hogs))]
            try:
                report(
                    f"{cburst}:{hogs}",
                    sample_under_load(net, devs, cap_mbps, args.seconds, args.sample_s),
                    spec.ocs_rate_mbps,
                )
            finally:
                for proc in busy:
                    proc.kill()
                    proc.wait()


if __name__ == "__main__":
    main()
