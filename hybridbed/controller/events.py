"""One OCS reconfiguration, as the controller logs it, the simulator replays it and the results record it.

Times are seconds on the clock of whoever made the event (unix time in the controller, simulated seconds in
the simulator); `csv_row` writes them relative to the start of the workload, as ocs_events.csv holds them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

OCS_EVENT_FIELDS = [
    "seq",
    "reason",
    "requested_s",
    "dark_from_s",
    "dark_until_s",
    "done_s",
    "configured_delay_ms",
    "circuits_before",
    "circuits_after",
]


@dataclass(frozen=True)
class OcsEvent:
    """Asked for at `requested` (periodic mode: when the demand was sampled); the affected rack pairs were sent
    off their circuits at `dark_from`; the new circuits carried traffic from `dark_until` (in emulation: when
    their switches had confirmed it); the switches confirmed everything at `done`. Circuits are lists of
    {src_rack, src_port, dst_rack, dst_port}."""

    seq: int
    reason: str
    requested: float
    dark_from: float
    dark_until: float
    done: float
    configured_delay_ms: float
    circuits_before: list[dict]
    circuits_after: list[dict]

    def to_dict(self) -> dict:
        """The JSON form (REST API, the controller's event log)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> OcsEvent:
        return cls(**data)

    def csv_row(self, t0: float = 0.0) -> dict:
        """ocs_events.csv: times in seconds after t0, circuits as JSON."""

        def since(t: float) -> float:
            return round(t - t0, 6)

        return {
            "seq": self.seq,
            "reason": self.reason,
            "requested_s": since(self.requested),
            "dark_from_s": since(self.dark_from),
            "dark_until_s": since(self.dark_until),
            "done_s": since(self.done),
            "configured_delay_ms": self.configured_delay_ms,
            "circuits_before": json.dumps(self.circuits_before),
            "circuits_after": json.dumps(self.circuits_after),
        }

    @classmethod
    def from_csv_row(cls, row: dict) -> OcsEvent:
        """An ocs_events.csv row read back (times stay relative to the run's start)."""
        return cls(
            int(row["seq"]),
            str(row["reason"]),
            float(row["requested_s"]),
            float(row["dark_from_s"]),
            float(row["dark_until_s"]),
            float(row["done_s"]),
            float(row["configured_delay_ms"]),
            json.loads(row["circuits_before"]),
            json.loads(row["circuits_after"]),
        )


def circuit_pairs(circuits: list[dict]) -> set[tuple[int, int]]:
    """The (source rack, destination rack) pairs of an event's circuit list."""
    return {(c["src_rack"], c["dst_rack"]) for c in circuits}


def read_event_log(path: Path) -> list[OcsEvent]:
    """The events of the controller's JSON-lines log (one per line, appended as they happen); it outlives the
    controller, so a run whose controller died still has its events. A line cut short by a crash is skipped."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(OcsEvent.from_dict(json.loads(line)))
        except (ValueError, TypeError):
            continue
    return events
