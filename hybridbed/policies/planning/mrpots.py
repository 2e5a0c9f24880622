"""MR-POTS (multi-resource partial-ordered task scheduling): DRP picks at most one subtask per dominant
resource, MUA gives the picked subtasks the fractions of their demands that use the pool best (§III).

The paper's model: one pool with a capacity per resource, slotted time; a subtask needs a total amount of
each resource and is served, under proportional allocation (Eq. 5), at one rate k: the fraction of its
total demand it receives per slot. Demands here are given as shares of one slot of the pool (d^r / c^r),
so a subtask of dominant share 3 needs at least three slots.

- MUA (Eq. 9): maximise Σ_i Σ_r a_ir·k_i subject to Σ_i a_ir·k_i ≤ 1 for every resource r and
  0 ≤ k_i ≤ 1 (a_ir: subtask i's share of resource r per unit of k), solved with scipy's HiGHS. The
  paper holds the rates for a stable period and then sprints one slot; here every slot is worked out
  afresh (the picks, so the rates, stay the same until one finishes) and what is left of each slot
  finishes any picked subtask whose remainder fits, least left first (the sprint, every slot).
- DRP (Eqs. 10-12): a subtask's priority is its eligibility time plus its dominant share (virtual time:
  first come, first served, shortest first among equals; smallest first); a successor not yet eligible
  gets the latest of its predecessors' DRPs as its start. Look-ahead: where a group's best two are within
  one slot and the second's successor is the best of its own group, the second goes first.
DRP never starves a subtask: a later arrival's DRP is at least its arrival time, so only the finitely
many subtasks with a smaller DRP in the same group go before one.

`PoolSimulation` runs DRP + MUA on one pool slot by slot (the paper's setting; the tests use it). How the
policy maps pools onto the cluster is the policy's business.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np
from scipy.optimize import linprog

TOLERANCE = 1e-9


def dominant(shares: tuple[float, ...]) -> int:
    """The index of the resource the subtask needs most of, as a share of the pool (ties: the first)."""
    return max(range(len(shares)), key=lambda r: (shares[r], -r))


def mua(shares: list[tuple[float, ...]], floor: float = 0.0) -> list[float]:
    """MUA's LP (Eq. 9): each subtask's rate k in [floor, 1] (the fraction of `shares` it gets per slot) so
    that the pool's use, summed over its resources, is as large as the capacity allows (the floor is
    dropped when the subtasks cannot all have it)."""
    return list(_mua(tuple(shares), floor))


@functools.lru_cache(maxsize=4096)  # a host runs few mixes of stage shapes, and each LP costs a millisecond
def _mua(shares: tuple[tuple[float, ...], ...], floor: float) -> tuple[float, ...]:
    if not shares:
        return ()
    a = np.asarray(shares, dtype=float)  # subtasks x resources
    if floor > 0 and np.any(a.sum(axis=0) * floor > 1.0):
        floor = 0.0
    result = linprog(
        -a.sum(axis=1), A_ub=a.T, b_ub=np.ones(a.shape[1]), bounds=[(floor, 1.0)] * len(shares), method="highs"
    )
    if not result.success:
        raise RuntimeError(f"MUA's LP failed: {result.message}")
    return tuple(float(k) for k in np.clip(result.x, 0.0, 1.0))


@dataclass(frozen=True)
class Candidate:
    """A subtask as DRP weighs it: its dominant-resource group, its DRP (Eq. 10, or Eq. 12 when it is not
    eligible yet) and the subtasks that wait for it."""

    key: Any  # the caller's name for the subtask (a stage: (job, stage index))
    group: int
    drp: float
    eligible: bool
    successors: tuple[Hashable, ...] = ()

    @functools.cached_property
    def order(self) -> tuple[float, str]:
        """DRP's order: the smallest DRP first, ties by name (worked out once: a caller may reuse candidates)."""
        return (self.drp, str(self.key))


def drp_pick(candidates: list[Candidate], lookahead: float = 1.0) -> list[Candidate]:
    """DRP (Alg. 2): per dominant-resource group, the eligible candidate with the smallest DRP, except that
    the second goes first when it is within `lookahead` (one slot) of the first and a successor of it is
    the best of its own group; where some picks are predecessors of another group's best (waiting)
    successor, only those."""
    groups: dict[int, list[Candidate]] = {}
    for candidate in sorted(candidates, key=attrgetter("order")):
        groups.setdefault(candidate.group, []).append(candidate)
    best_of_group = {group: members[0].key for group, members in groups.items()}
    by_key = {c.key: c for c in candidates}

    def unlocks(candidate: Candidate) -> bool:
        return any(best_of_group.get(by_key[n].group) == n for n in candidate.successors if n in by_key)

    chosen = []
    for members in groups.values():
        eligible = [c for c in members if c.eligible]
        if not eligible:
            continue
        first = eligible[0]
        if len(eligible) > 1 and eligible[1].drp - first.drp <= lookahead and unlocks(eligible[1]):
            first = eligible[1]
        chosen.append(first)
    return [c for c in chosen if unlocks(c)] or chosen


@dataclass
class Subtask:
    """A subtask of a partial-ordered task: its total demand as shares of one slot of the pool per resource,
    and the subtasks (of the same task) that must finish before it starts."""

    key: str
    demand: tuple[float, ...]
    after: tuple[str, ...] = ()
    left: float = 1.0  # the fraction of its demand still to serve
    eligible_at: float | None = None
    finished_at: float | None = None

    @property
    def group(self) -> int:
        return dominant(self.demand)

    @property
    def length(self) -> float:
        """d* / c*: slots it takes alone on its dominant resource."""
        return max(self.demand)


@dataclass
class PoolSimulation:
    """DRP + MUA on one pool, one slot at a time."""

    subtasks: dict[str, Subtask] = field(default_factory=dict)
    successors: dict[str, list[str]] = field(default_factory=dict)
    now: float = 0.0
    utilisation: list[float] = field(default_factory=list)  # per slot: the pool's use, averaged over resources

    def submit(self, subtasks: list[Subtask]) -> None:
        """A task arrives: its subtasks join, those without predecessors eligible now."""
        for sub in subtasks:
            self.subtasks[sub.key] = sub
            for before in sub.after:
                self.successors.setdefault(before, []).append(sub.key)
            if not sub.after:
                sub.eligible_at = self.now

    def drp(self, sub: Subtask) -> float:
        """Eq. 10 for an eligible subtask; Eqs. 11-12 for one still waiting for its predecessors."""
        if sub.eligible_at is not None:
            return sub.eligible_at + sub.length
        return max(self.drp(self.subtasks[b]) for b in sub.after) + sub.length

    def pick(self) -> list[Subtask]:
        """DRP's picks among the subtasks not finished (see `drp_pick`)."""
        waiting = [s for s in self.subtasks.values() if s.finished_at is None]
        picked = drp_pick(
            [
                Candidate(s.key, s.group, self.drp(s), s.eligible_at is not None, tuple(self.successors.get(s.key, ())))
                for s in waiting
            ]
        )
        return [self.subtasks[c.key] for c in picked]

    def step(self) -> None:
        """One slot: DRP's picks served at MUA's rates; a subtask whose remainder fits what is left of the
        slot is finished in it (the sprint)."""
        picked = self.pick()
        if not picked:
            self.now += 1.0
            self.utilisation.append(0.0)
            return
        rates = mua([s.demand for s in picked])
        used = np.zeros(len(picked[0].demand))
        for sub, k in zip(picked, rates):
            k = min(k, sub.left)
            used += np.asarray(sub.demand) * k
            sub.left -= k
        for sub in sorted(picked, key=lambda s: s.left):  # sprint: least left first, while it fits
            extra = np.asarray(sub.demand) * sub.left
            if sub.left > TOLERANCE and np.all(used + extra <= 1.0 + TOLERANCE):
                used += extra
                sub.left = 0.0
        self.now += 1.0
        self.utilisation.append(float(used.mean()))
        for sub in picked:
            if sub.left <= TOLERANCE:
                self._finish(sub)

    def _finish(self, sub: Subtask) -> None:
        sub.finished_at = self.now
        for key in self.successors.get(sub.key, ()):
            successor = self.subtasks[key]
            if all(self.subtasks[b].finished_at is not None for b in successor.after):
                successor.eligible_at = self.now

    def done(self) -> bool:
        return all(s.finished_at is not None for s in self.subtasks.values())
