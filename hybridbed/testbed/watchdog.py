"""A run's watchdog: removes the run when the process that owns it dies without tearing it down.

A `hybridbed` process killed with SIGKILL (or lost to an out-of-memory kill) would otherwise leave its run going
on as an orphan: scheduler, workers, controller and Open vSwitch, whose workers then crash on their next launch.
The watchdog is started as soon as the run's manifest exists, in a session of its own (a terminal's Ctrl-C does
not reach it) and outside the run's cgroup (the cleanup does not end it). Every `POLL_S` it looks at the
manifest: gone means the owner tore the run down, and the watchdog exits; there with its owner (pid and start
time) dead, and the watchdog cleans the run as `hybridbed clean` would and appends what it removed to
`REAPED_LOG`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from hybridbed.testbed.cleanup import clean_run
from hybridbed.testbed.runs import STATE_ROOT, RunManifest

POLL_S = 0.5
REAPED_LOG = STATE_ROOT / "reaped.log"


def start_watchdog(manifest_path: Path) -> subprocess.Popen:
    """Watch the run whose manifest is at `manifest_path`, from a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "hybridbed.testbed.watchdog", str(manifest_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def watch(manifest_path: Path, poll_s: float = POLL_S) -> list[str]:
    """Wait until the run ends; returns what had to be removed (nothing when its owner tore it down)."""
    while True:
        try:
            manifest = RunManifest.load(manifest_path)
        except FileNotFoundError:
            return []
        except ValueError:  # caught mid-replace; the next look sees the whole file
            time.sleep(poll_s)
            continue
        if not manifest.owner_alive():
            removed = clean_run(manifest)
            with REAPED_LOG.open("a") as log:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                log.write(f"{stamp} run {manifest.run_id}: owner pid {manifest.owner_pid} gone; {'; '.join(removed)}\n")
            return removed
        time.sleep(poll_s)


def main(argv: list[str] | None = None) -> int:
    (manifest_path,) = argv if argv is not None else sys.argv[1:]
    watch(Path(manifest_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
