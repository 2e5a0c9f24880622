"""Data locality of a map task relative to a host: on the host, in its rack, or off-rack."""
from __future__ import annotations

import enum


class Locality(enum.IntEnum):
    NODE = 0
    RACK = 1
    OFF_RACK = 2


def locality_of(replicas: tuple[str, ...], host: str, rack_of: dict[str, int]) -> Locality:
    """Where a task reads from, seen from `host`: tasks without input blocks (reduces) count as node-local."""
    if not replicas or host in replicas:
        return Locality.NODE
    if any(rack_of[r] == rack_of[host] for r in replicas):
        return Locality.RACK
    return Locality.OFF_RACK
