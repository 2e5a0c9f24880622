"""A run's results directory as it begins: created (never over an earlier run's), then the resolved scenario
(scenario.json) and what the run ran on (environment.json), before anything runs: a result can only be
reproduced, or a difference between two machines explained, with the versions and the machine beside it."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import psutil

from hybridbed.config.scenario import Scenario

PYTHON_PACKAGES = ("hybridbed", "numpy", "numba", "pandas", "scipy", "networkx", "pydantic", "matplotlib")
EMULATION_PACKAGES = ("os-ken",)
COMMAND_TIMEOUT_S = 5.0
SOURCE_DIR = Path(__file__).resolve().parents[2]


def _first_line(command: list[str], cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _source_revision() -> str | None:
    """The git commit hybridbed runs from, `+changes` when its tree differs from it (None outside a clone)."""
    if not (SOURCE_DIR / ".git").exists():
        return None
    commit = _first_line(["git", "rev-parse", "HEAD"], SOURCE_DIR)
    changed = _first_line(["git", "status", "--porcelain", "--untracked-files=no"], SOURCE_DIR)
    return None if commit is None else commit + ("+changes" if changed else "")


def describe_environment(backend: str) -> dict:
    """The machine (kernel, CPUs, memory), Python and the packages a result depends on; for emulation also
    Open vSwitch, Mininet and os-ken."""
    packages = PYTHON_PACKAGES + (EMULATION_PACKAGES if backend == "emulation" else ())
    environment = {
        "backend": backend,
        "hybridbed_revision": _source_revision(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
        "packages": {name: _package_version(name) for name in packages},
    }
    if backend == "emulation":
        environment["open_vswitch"] = _first_line(["ovs-vsctl", "--version"])
        environment["mininet"] = _first_line(["mn", "--version"])
    return environment


def begin_run_dir(scenario: Scenario, out_dir: Path) -> None:
    """Create out_dir (an existing one is refused) with scenario.json and environment.json in it."""
    out_dir.mkdir(parents=True, exist_ok=False)
    (out_dir / "scenario.json").write_text(scenario.model_dump_json(indent=2))
    (out_dir / "environment.json").write_text(json.dumps(describe_environment(scenario.backend), indent=2))
