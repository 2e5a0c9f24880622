"""The record of what a run created, kept on disk from the first step so cleanup works after any crash.

Each run has a state directory /run/hybridbed/<run-id>/ (tmpfs: it vanishes on reboot together with
everything it describes) holding manifest.json, the private Open vSwitch files and the daemons' logs.
The path is short on purpose: OVS control sockets live there and Unix socket paths are limited to 108 bytes.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_ROOT = Path(os.environ.get("HYBRIDBED_STATE_ROOT", "/run/hybridbed"))


def start_ticks(pid: int) -> int:
    """When the process started, in clock ticks since boot (`starttime` in /proc/<pid>/stat): fixed for the
    process's life. psutil's create_time adds to it the boot time as the wall clock puts it now, which moves
    whenever the clock is set (NTP, a virtual machine resumed), by a whole second even for a small step (the
    kernel gives it in whole seconds): a step made a run's watchdog take its live owner for gone and remove the
    run under it (docs/reliability.md)."""
    return int(_stat_fields(pid)[19])


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (which may hold spaces), from the 3rd on: state, ppid..."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()


@dataclass
class ProcessRecord:
    """A process the run started, identified by pid and start so a reused pid is never mistaken for it."""

    pid: int
    start_ticks: int  # `start_ticks(pid)` when recorded
    role: str

    def is_alive(self) -> bool:
        """True while this very process runs (a zombie has ended; it only awaits its parent)."""
        try:
            fields = _stat_fields(self.pid)
        except OSError:  # gone (its /proc entry with it)
            return False
        return fields[0] not in ("Z", "X") and int(fields[19]) == self.start_ticks  # Z: zombie, X: dead


@dataclass
class RunManifest:
    run_id: str
    state_dir: str
    created: float
    owner_pid: int
    owner_start_ticks: int
    netns: str | None = None
    cgroups: list[str] = field(default_factory=list)
    processes: list[ProcessRecord] = field(default_factory=list)
    status: str = "starting"
    # the run's parts on further servers not yet known to be gone: {"server": ServerSpec, "address", "run_id"}
    remote_parts: list[dict] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> RunManifest:
        data = json.loads(path.read_text())
        data["processes"] = [ProcessRecord(**p) for p in data.get("processes", [])]
        return cls(**data)

    def owner_alive(self) -> bool:
        return ProcessRecord(self.owner_pid, self.owner_start_ticks, "owner").is_alive()


class RunRecord:
    """Creates a run's state directory and keeps its manifest current on disk after every change."""

    def __init__(self, manifest: RunManifest):
        self.manifest = manifest
        self.state_dir = Path(manifest.state_dir)
        self._lock = threading.Lock()

    @classmethod
    def create(cls, run_id: str | None = None) -> RunRecord:
        """A new run's record, under `run_id` (a further server's part of a run has its first server's id with
        a suffix) or a fresh one."""
        run_id = run_id or f"hb{secrets.token_hex(3)}"
        state_dir = STATE_ROOT / run_id
        state_dir.mkdir(parents=True, mode=0o755)
        me = os.getpid()
        record = cls(
            RunManifest(
                run_id=run_id,
                state_dir=str(state_dir),
                created=time.time(),
                owner_pid=me,
                owner_start_ticks=start_ticks(me),
            )
        )
        record.save()
        return record

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def manifest_path(self) -> Path:
        return self.state_dir / "manifest.json"

    def save(self) -> None:
        """Write the manifest atomically, so a crash mid-write never leaves it unreadable (and one writer at a
        time: the controller's supervisor records a restarted controller from a thread of its own)."""
        with self._lock:
            tmp = self.manifest_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(asdict(self.manifest), indent=2))
            os.replace(tmp, self.manifest_path)

    def add_process(self, pid: int, role: str) -> None:
        self.manifest.processes.append(ProcessRecord(pid, start_ticks(pid), role))
        self.save()

    def set(self, **fields: object) -> None:
        for name, value in fields.items():
            setattr(self.manifest, name, value)
        self.save()


def recorded_runs() -> list[RunManifest]:
    """Every run that still has a state directory, oldest first."""
    if not STATE_ROOT.is_dir():
        return []
    manifests = []
    for path in sorted(STATE_ROOT.glob("*/manifest.json")):
        try:
            manifests.append(RunManifest.load(path))
        except (OSError, ValueError, TypeError) as err:
            raise RuntimeError(f"unreadable run manifest {path}: {err}") from err
    return sorted(manifests, key=lambda m: m.created)
