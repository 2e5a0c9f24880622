"""One machine's planned use over time, for the planners that place tasks in a resource-time space
(DAGPS's BuildSchedule, DSP's list schedule): a step function of the demands in use, so that finding
the earliest start where a task fits is one scan of the segments after its earliest start, and placing
it splits at most two segments (the paper's free-region map, DAGPS §4.4, serves the same purpose)."""

from __future__ import annotations

import bisect
import math

CAPACITY_TOLERANCE = 1e-9


class UsageTimeline:
    """use[i] is in use on [times[i], times[i + 1]) (the last segment to infinity), from -infinity with
    nothing in use (None). A task fits where its demand plus what is in use stays within `capacity` (None:
    1 in every dimension) in every segment that overlaps it by more than `time_tolerance`."""

    __slots__ = ("capacity", "time_tolerance", "times", "use")

    def __init__(
        self,
        capacity: tuple[float, ...] | None = None,
        time_tolerance: float = 0.0,
        times: list[float] | None = None,
        use: list[tuple[float, ...] | None] | None = None,
    ):
        self.capacity, self.time_tolerance = capacity, time_tolerance
        self.times: list[float] = times if times is not None else [-math.inf]
        self.use: list[tuple[float, ...] | None] = use if use is not None else [None]

    def copy(self) -> UsageTimeline:
        return UsageTimeline(self.capacity, self.time_tolerance, list(self.times), list(self.use))

    def mirrored(self) -> UsageTimeline:
        """Time running backwards: [a, b) becomes [-b, -a)."""
        ends = [-t for t in reversed(self.times[1:])]
        return UsageTimeline(self.capacity, self.time_tolerance, [-math.inf, *ends], list(reversed(self.use)))

    def fits(self, demand: tuple[float, ...], in_use: tuple[float, ...] | None) -> bool:
        capacity = self.capacity or (1.0,) * len(demand)
        if in_use is None:
            return all(d <= c + CAPACITY_TOLERANCE for d, c in zip(demand, capacity))
        return all(d + u <= c + CAPACITY_TOLERANCE for d, u, c in zip(demand, in_use, capacity))

    def earliest_fit(
        self, duration: float, demand: tuple[float, ...], not_before: float, before: float = math.inf
    ) -> float:
        """The earliest start from `not_before` (and before `before`) where the task fits for its whole
        duration; infinity when there is none."""
        times, use, tolerance = self.times, self.use, self.time_tolerance
        start = not_before
        j = bisect.bisect_right(times, start) - 1
        while start < before:
            if times[j] >= start + duration - tolerance and times[j] > start - tolerance:
                return start  # the segments before cover the whole duration
            end = times[j + 1] if j + 1 < len(times) else math.inf
            if end > start + tolerance and not self.fits(demand, use[j]):
                if end == math.inf:
                    return math.inf  # larger than the machine
                start = end  # no room in this segment: the earliest start is after it
            elif end == math.inf:
                return start
            j += 1
        return math.inf

    def add(self, start: float, end: float, demand: tuple[float, ...]) -> None:
        """A task uses `demand` on [start, end)."""
        first, last = self._split(start), self._split(end)
        for k in range(first, last):
            current = self.use[k]
            self.use[k] = demand if current is None else tuple(a + b for a, b in zip(current, demand))

    def _split(self, at: float) -> int:
        """The index of the segment starting at `at`, splitting the one that holds it."""
        k = bisect.bisect_right(self.times, at) - 1
        if self.times[k] == at:
            return k
        self.times.insert(k + 1, at)
        self.use.insert(k + 1, self.use[k])
        return k + 1
