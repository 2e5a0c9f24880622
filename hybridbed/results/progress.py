"""A run's progress as it goes: what the backends report to the CLI's progress bar, and `progress.json`,
through which the emulated scheduler process tells the orchestrator."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

PROGRESS_FILE = "progress.json"


@dataclass
class Progress:
    jobs_done: int
    jobs_total: int
    elapsed_s: float  # of the workload: wall-clock in emulation, simulated in simulation
    running_tasks: int
    lost_hosts: list[str] = field(default_factory=list)
    final: bool = False
    started_at_unix: float | None = None  # when the workload began (emulation): the origin of every result time


def write_progress(out_dir: Path, progress: Progress) -> None:
    """Replace progress.json atomically, so a reader never sees half a file."""
    tmp = out_dir / f"{PROGRESS_FILE}.tmp"
    tmp.write_text(json.dumps(asdict(progress)))
    tmp.replace(out_dir / PROGRESS_FILE)


def read_progress(out_dir: Path) -> Progress | None:
    """The last progress written to out_dir, or None before the first."""
    path = out_dir / PROGRESS_FILE
    return Progress(**json.loads(path.read_text())) if path.exists() else None
