"""How a host's cores are shared among the tasks computing on it, when their CPU quotas together exceed them.

Each task runs in a cgroup of its own with the default weight (cpu.shares 1024, cpu.weight 100) and a CFS
quota of its allotted cores, so Linux gives the runnable tasks equal shares of the host, none more than its
quota: max-min fairness with each task capped by its quota. That only matters when a policy over-commits the
cores (Fair's slots mode allocates memory slots alone, as YARN's slot-based schedulers do, Tetris §2.1);
otherwise every task gets its quota. The worker agent (emulation) and the simulator both share by this rule.
"""

from __future__ import annotations

from collections.abc import Mapping


def cpu_shares(quotas: Mapping[str, float], cores: float) -> dict[str, float]:
    """The cores each computing task gets on a host of `cores`: its quota while the quotas fit, else the
    max-min fair share of the host with each task capped by its quota."""
    if sum(quotas.values()) <= cores + 1e-9:
        return dict(quotas)
    shares: dict[str, float] = {}
    left, waiting = cores, sorted(quotas, key=lambda key: quotas[key])
    while waiting:
        level = left / len(waiting)
        if quotas[waiting[0]] > level:  # nobody left below the equal share: they all get it
            shares.update(dict.fromkeys(waiting, level))
            break
        key = waiting.pop(0)
        shares[key] = quotas[key]
        left -= quotas[key]
    return shares


class HostCpu:
    """The tasks computing on one host (running, not frozen) and the cores each gets now."""

    def __init__(self, cores: float):
        self.cores = cores
        self._quotas: dict[str, float] = {}
        self.given: dict[str, float] = {}

    def set(self, key: str, quota: float | None) -> dict[str, float]:
        """Task `key` computes under this quota now (None: it stopped computing or is frozen). Returns the
        cores of every task whose cores changed, and of `key` itself while it computes."""
        if quota is None:
            self._quotas.pop(key, None)
            self.given.pop(key, None)
        else:
            self._quotas[key] = quota
        shares = cpu_shares(self._quotas, self.cores)
        changed = {k: v for k, v in shares.items() if k == key or abs(self.given.get(k, -1.0) - v) > 1e-12}
        self.given.update(changed)
        return changed
