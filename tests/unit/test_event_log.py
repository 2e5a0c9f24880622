"""The controller's event log is read back whole, whether or not the controller still runs."""

from __future__ import annotations

import json

from hybridbed.controller.events import OcsEvent, read_event_log


def event(seq: int) -> OcsEvent:
    circuit = [{"src_rack": 0, "src_port": 0, "dst_rack": 1, "dst_port": 0}]
    return OcsEvent(seq, "periodic", 10.0 + seq, 10.1 + seq, 10.2 + seq, 10.3 + seq, 10.0, [], circuit)


def test_the_log_gives_back_every_event_and_skips_a_line_cut_short(tmp_path):
    log = tmp_path / "ocs_events.jsonl"
    assert read_event_log(log) == []
    lines = [json.dumps(event(i).to_dict()) for i in range(3)]
    log.write_text("\n".join(lines) + "\n" + lines[0][: len(lines[0]) // 2])  # a crash mid-write
    assert read_event_log(log) == [event(0), event(1), event(2)]
