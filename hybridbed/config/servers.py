"""The servers an emulated fabric spreads over, and which racks each one holds.

The machine hybridbed runs on is server 0: it keeps the EPS core, the OCS, the controller and the scheduler,
and some racks. Each further server holds whole racks (hosts and ToR together), so only the ToR-EPS and ToR-OCS
links cross servers. A servers file is a YAML list of `ServerSpec`s:

    - host: 192.0.2.11
      key_file: /root/.ssh/hybridbed
    - host: 192.0.2.12
      racks: 3
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from hybridbed.config.validation import SpecError, describe_validation_error


class ServersNotReady(RuntimeError):
    """One or more further servers cannot take part (testbed/preflight.py); a line per problem, each naming its
    server."""


class ServerSpec(BaseModel):
    """One further server, reached over ssh as root (the emulation needs root there as here)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(min_length=1, description="hostname or IPv4 address this machine reaches the server at")
    user: str = Field(default="root", min_length=1, description="ssh login; the emulation needs root")
    port: int = Field(default=22, ge=1, le=65535, description="sshd's port")
    key_file: Path | None = Field(default=None, description="ssh identity file; unset: ssh's own defaults")
    known_hosts: Path | None = Field(
        default=None, description="known_hosts file holding the server's host key; unset: ssh's own defaults"
    )
    python: str | None = Field(
        default=None, description="the interpreter with hybridbed installed there; unset: the same path as here"
    )
    racks: int | None = Field(default=None, ge=1, description="racks placed there; unset: an even share")

    @property
    def interpreter(self) -> str:
        """The Python that runs hybridbed there: `python`, or the same path as this process's."""
        return self.python or sys.executable


_SERVER_LIST = TypeAdapter(list[ServerSpec])


def load_servers(path: Path) -> list[ServerSpec]:
    """The servers listed in a YAML file, validated, with errors that name the entry and field."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise SpecError(f"servers file {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise SpecError(f"servers file {path} is not valid YAML: {err}") from None
    if not isinstance(data, list) or not data:
        raise SpecError(f"servers file {path}: expected a non-empty list of servers, got {type(data).__name__}")
    try:
        servers = _SERVER_LIST.validate_python(data)
    except ValidationError as err:
        raise SpecError(f"servers file {path}: {describe_validation_error(err, 'servers')}") from None
    hosts = [(s.host, s.port) for s in servers]
    if len(set(hosts)) != len(hosts):
        raise SpecError(f"servers file {path}: a server is listed twice ({hosts})")
    return servers


def place_racks(racks: int, servers: list[ServerSpec]) -> list[int]:
    """The server (0: this machine, k: servers[k-1]) of each rack, in contiguous blocks, this machine's first.
    Servers without a `racks` count and this machine share what the counts leave evenly, this machine taking
    the remainder; every server holds at least one rack."""
    fixed = sum(s.racks or 0 for s in servers)
    unset = sum(1 for s in servers if s.racks is None)
    share = (racks - fixed) // (unset + 1)
    if share < 1:
        raise SpecError(
            f"servers: {racks} racks leave none for this machine"
            + (f" or the {unset} servers without a `racks` count" if unset else "")
            + (f" once the counts given ({fixed}) are placed" if fixed else "")
        )
    counts = [racks - fixed - share * unset] + [s.racks if s.racks is not None else share for s in servers]
    return [server for server, count in enumerate(counts) for _ in range(count)]
