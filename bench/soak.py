"""Soak: short runs back to back, simulation and emulation alternating, with a fault injected into each at a
random moment: Ctrl-C to the run's process group (twice, 0.2 s apart), or SIGKILL of a worker agent, of the
controller or of the scheduler (emulation only). After each run it checks what the run left behind (processes,
namespace, cgroups, state directory: must be nothing) and whether the command ended the way its fault allows
(Ctrl-C: interrupted, results kept; a worker or the controller: the run completes; the scheduler: the run
fails with a message, results kept; never a traceback); at the end, how the machine's available memory,
open file handles and network namespaces moved from the first run to the last. Root (emulation):
    .venv/bin/python bench/soak.py [--runs 50] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml
from rich.console import Console
from rich.table import Table

from hybridbed.testbed.runs import STATE_ROOT, RunManifest

REPO = Path(__file__).resolve().parents[1]
EMULATED_FAULTS = ("interrupt", "worker", "controller", "scheduler")
SIMULATED_FAULTS = ("interrupt", "none")
RUN_TIMEOUT_S = 300


def scenario_files(tmp: Path) -> dict[str, Path]:
    """A small emulated scenario (2 racks x 2 hosts, six jobs of about 20 s) and the quickstart simulated."""
    trace = tmp / "jobs.tsv"
    trace.write_text("".join(f"job{i}\t{i}\t1\t8000000\t4000000\t1000000\n" for i in range(6)))
    emulated = {
        "name": "soak",
        "seed": 1,
        "fabric": {"racks": 2, "hosts_per_rack": 2},
        "ocs": {"mode": "periodic", "demand_source": "measured"},
        "workers": {"slots_per_host": 2, "cores_per_host": 2, "memory_mb_per_host": 1024},
        "workload": {
            "source": "swim",
            "trace": str(trace),
            "jobs": 6,
            "shape": {"block_mb": 2, "reduce_input_mb": 2, "map_rate_mb_s": 1, "reduce_rate_mb_s": 1},
        },
        "scheduler": {"policy": "fair", "heartbeat_timeout_s": 2.0},
        "max_duration_s": 240,
    }
    path = tmp / "soak.yaml"
    path.write_text(yaml.safe_dump(emulated))
    return {"emulation": path, "simulation": REPO / "scenarios" / "quickstart.yaml"}


def machine() -> dict:
    """What a leaking run would grow: available memory, open file handles, network namespaces."""
    netns = Path("/run/netns")
    return {
        "available_mb": psutil.virtual_memory().available / 2**20,
        "open_files": int(Path("/proc/sys/fs/file-nr").read_text().split()[0]),
        "netns": len(list(netns.iterdir())) if netns.is_dir() else 0,
    }


def manifest_of(pid: int) -> RunManifest | None:
    for path in STATE_ROOT.glob("*/manifest.json"):
        try:
            manifest = RunManifest.load(path)
        except (OSError, ValueError):
            continue
        if manifest.owner_pid == pid:
            return manifest
    return None


def leftovers(manifest: RunManifest | None) -> list[str]:
    if manifest is None:
        return []
    found = [f"{p.role} pid {p.pid}" for p in manifest.processes if p.is_alive()]
    found += [path for path in [manifest.state_dir, *manifest.cgroups] if Path(path).exists()]
    if manifest.netns and Path("/run/netns", manifest.netns).exists():
        found.append(f"netns {manifest.netns}")
    return found


def inject(proc: subprocess.Popen, fault: str, manifest: RunManifest | None) -> str:
    if fault == "interrupt":
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        return "two Ctrl-C"
    if fault == "none" or manifest is None:
        return "none"
    role = {"worker": "worker ", "controller": "controller", "scheduler": "scheduler"}[fault]
    victims = [
        p
        for p in RunManifest.load(Path(manifest.state_dir) / "manifest.json").processes
        if p.role.startswith(role) and p.is_alive()
    ]
    if not victims:
        return f"no {fault} to kill"
    victim = random.choice(victims)
    os.kill(victim.pid, signal.SIGKILL)
    return f"SIGKILL {victim.role}"


def expected(fault: str, code: int, summary: dict | None, stderr: str, out: Path) -> bool:
    stderr = " ".join(stderr.split())  # the console wraps its lines
    if "Traceback" in stderr:
        return False
    if fault == "interrupt":  # before the scheduler started there is nothing to summarise
        if summary is None:
            return not (out / "tasks.csv").exists()
        return summary["status"] in ("interrupted", "done")
    if fault == "scheduler":
        return code == 1 and "scheduler exited" in stderr
    return code == 0 and summary is not None and summary["status"] == "done"


def one_run(i: int, backend: str, scenario: Path, out: Path, rng: random.Random) -> dict:
    fault = rng.choice(EMULATED_FAULTS if backend == "emulation" else SIMULATED_FAULTS)
    command = [sys.executable, "-m", "hybridbed.cli", "run", str(scenario), "--backend", backend, "--out", str(out)]
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # Ctrl-C must reach it as a terminal's foreground job, even when this bench runs as a background job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    manifest = None
    delay = rng.uniform(1.0, 12.0) if backend == "emulation" else rng.uniform(0.5, 2.5)
    while time.monotonic() - started < delay and proc.poll() is None:
        manifest = manifest or manifest_of(proc.pid)
        time.sleep(0.1)
    done = inject(proc, fault, manifest) if proc.poll() is None else "none (run already over)"
    try:
        _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    time.sleep(1.0)  # a watchdog that has to act does within half a second
    left = leftovers(manifest)
    ok = expected(fault, proc.returncode, summary, stderr, out) or done.startswith("none")
    return {
        "run": i,
        "backend": backend,
        "fault": done,
        "exit": proc.returncode,
        "status": summary["status"] if summary else "-",
        "as expected": ok and not left,
        "left behind": ", ".join(left) or "nothing",
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("soak.py runs emulations: run it as root")
    rng = random.Random(args.seed)
    console = Console()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        scenarios = scenario_files(Path(tmp))
        first = machine()
        for i in range(args.runs):
            backend = "emulation" if i % 2 == 0 else "simulation"
            row = one_run(i, backend, scenarios[backend], Path(tmp) / f"run{i}", rng)
            rows.append(row)
            console.print(row)
        last = machine()
    table = Table(title=f"soak: {args.runs} runs, faults at random moments (seed {args.seed})")
    for key in rows[0]:
        table.add_column(key)
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)
    survived = sum(r["as expected"] for r in rows)
    leaks = [r for r in rows if r["left behind"] != "nothing"]
    console.print(
        f"runs ending as their fault allows, leaving nothing: {survived} of {len(rows)}; runs leaving something: {len(leaks)}"
    )
    console.print(
        "machine, first run to last: available memory {:+.0f} MB, open file handles {:+d}, network namespaces {:+d}".format(
            last["available_mb"] - first["available_mb"],
            last["open_files"] - first["open_files"],
            last["netns"] - first["netns"],
        )
    )


if __name__ == "__main__":
    main()
