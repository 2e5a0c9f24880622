"""How a host's cores and disk bandwidth are shared among the tasks using them, when what the tasks were
allotted together exceeds what the host has.

Cores: each task runs in a cgroup of its own with the default weight (cpu.shares 1024, cpu.weight 100) and
a CFS quota of its allotted cores, so Linux gives the runnable tasks equal shares of the host, none more
than its quota. Disk: a host's disk reads (a task reading its block, the data server reading what another
host fetches) and writes (a task writing its output) each share one bandwidth, every stream held to its
task's allotment where it has one, as the simulator shares a host's disk link max-min. Both are max-min
fairness with each user capped by its quota. That only matters when a policy over-commits the host (YARN
allocates cores and memory alone; Fair's slots mode memory alone, Tetris §2.1); otherwise every user gets
its quota. The worker agent (emulation) and the simulator share by this one rule.
"""

from __future__ import annotations

from collections.abc import Mapping


def capped_fair_shares(quotas: Mapping[str, float], capacity: float) -> dict[str, float]:
    """What each user gets of `capacity`: its quota while the quotas fit, else the max-min fair share with
    each user capped by its quota."""
    if sum(quotas.values()) <= capacity + 1e-9:
        return dict(quotas)
    shares: dict[str, float] = {}
    left, waiting = capacity, sorted(quotas, key=lambda key: quotas[key])
    while waiting:
        level = left / len(waiting)
        if quotas[waiting[0]] > level:  # nobody left below the equal share: they all get it
            shares.update(dict.fromkeys(waiting, level))
            break
        key = waiting.pop(0)
        shares[key] = quotas[key]
        left -= quotas[key]
    return shares


class HostShare:
    """The users of one host resource (tasks computing and not frozen; disk streams under way) and what
    each gets of it now."""

    def __init__(self, capacity: float):
        self.capacity = capacity
        self._quotas: dict[str, float] = {}
        self.given: dict[str, float] = {}

    def set(self, key: str, quota: float | None) -> dict[str, float]:
        """`key` uses the resource under this quota now (None: it stopped using it). Returns what every user
        whose share changed gets now, and what `key` itself gets while it uses the resource."""
        if quota is None:
            self._quotas.pop(key, None)
            self.given.pop(key, None)
        else:
            self._quotas[key] = min(quota, self.capacity)
        shares = capped_fair_shares(self._quotas, self.capacity)
        changed = {k: v for k, v in shares.items() if k == key or abs(self.given.get(k, -1.0) - v) > 1e-12}
        self.given.update(changed)
        return changed
