"""The ssh command line hybridbed reaches a further server with: never a password prompt, the server's
identity and known hosts as its ServerSpec gives them, and optionally one shared connection."""

from __future__ import annotations

from pathlib import Path

from hybridbed.config.servers import ServerSpec

SSH_ALIVE_INTERVAL_S = 5  # a server that stops answering is given up after 3 intervals (ServerAliveCountMax)


def ssh_command(spec: ServerSpec, address: str, control_path: Path | None = None) -> list[str]:
    """`ssh ... user@address`, to which the remote command is appended; with `control_path`, every command
    shares the connection the first one opened (ControlMaster)."""
    options = ["-q", "-p", str(spec.port), "-o", "BatchMode=yes", "-o", f"ServerAliveInterval={SSH_ALIVE_INTERVAL_S}"]
    if spec.key_file is not None:
        options += ["-i", str(spec.key_file), "-o", "IdentitiesOnly=yes"]
    if spec.known_hosts is not None:
        options += ["-o", f"UserKnownHostsFile={spec.known_hosts}"]
    if control_path is not None:
        options += ["-o", "ControlMaster=auto", "-o", f"ControlPath={control_path}", "-o", "ControlPersist=yes"]
    return ["ssh", *options, f"{spec.user}@{address}"]
