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

import psutil

STATE_ROOT = Path(os.environ.get("HYBRIDBED_STATE_ROOT", "/run/hybridbed"))


@dataclass
class ProcessRecord:
    """A process the run started, identified by pid and start time so a reused pid is never mistaken for it."""

    pid: int
    create_time: float
    role: str

    def is_alive(self) -> bool:
        """True while this very process runs (a zombie has ended; it only awaits its parent)."""
        try:
            proc = psutil.Process(self.pid)
            return abs(proc.create_time() - self.create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


@dataclass
class RunManifest:
    run_id: str
    state_dir: str
    created: float
    owner_pid: int
    owner_create_time: float
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
        return ProcessRecord(self.owner_pid, self.owner_create_time, "owner").is_alive()


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
        me = psutil.Process()
        record = cls(
            RunManifest(
                run_id=run_id,
                state_dir=str(state_dir),
                created=time.time(),
                owner_pid=me.pid,
                owner_create_time=me.create_time(),
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
        self.manifest.processes.append(ProcessRecord(pid, psutil.Process(pid).create_time(), role))
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
