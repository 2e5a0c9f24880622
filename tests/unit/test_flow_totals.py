"""What the JobPacker paper separates: the OCS share of cross-rack shuffle bytes, input reads apart."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hybridbed.results.records import FLOW_PATH_FIELDS
from hybridbed.results.summary import add_flow_totals

MB = 1_000_000


def flow(job, kind, src_rack, dst_rack, size, ocs_bytes=0):
    return {
        "job_id": job,
        "task_id": f"{job}-t",
        "attempt": 0,
        "kind": kind,
        "src_host": f"r{src_rack}h0",
        "dst_host": f"r{dst_rack}h0",
        "src_rack": src_rack,
        "dst_rack": dst_rack,
        "bytes": size,
        "start_s": 0.0,
        "end_s": 1.0,
        "path": "",
        "ocs_bytes": ocs_bytes,
    }


def totals(tmp_path, flows, elephant_bytes=10 * MB):
    pd.DataFrame(flows, columns=FLOW_PATH_FIELDS).to_csv(tmp_path / "flows.csv", index=False)
    (tmp_path / "summary.json").write_text(json.dumps({"status": "done"}))
    added = add_flow_totals(tmp_path, elephant_bytes)
    assert json.loads((tmp_path / "summary.json").read_text()) == {"status": "done", **added}
    return added


def test_input_reads_do_not_count_in_the_shuffle_share(tmp_path):
    got = totals(
        tmp_path,
        [
            flow("j1", "shuffle", 0, 1, 8 * MB, ocs_bytes=6 * MB),
            flow("j1", "shuffle", 0, 1, 4 * MB, ocs_bytes=3 * MB),  # j1's 0->1 aggregate: 12 MB, an elephant
            flow("j1", "shuffle", 1, 1, 5 * MB),  # inside a rack
            flow("j2", "shuffle", 2, 0, 4 * MB),  # small, on the EPS
            flow("j2", "input", 2, 0, 100 * MB, ocs_bytes=100 * MB),  # an input read over a circuit: apart
            flow("j2", "input", 0, 0, 50 * MB),
        ],
    )
    assert got["shuffle_ocs_share"] == pytest.approx(9 / 16)
    assert got["cross_rack_shuffle_bytes"] == 16 * MB and got["intra_rack_shuffle_bytes"] == 5 * MB
    assert got["cross_rack_input_bytes"] == 100 * MB
    assert got["elephant_aggregates"] == 1


def test_aggregates_are_per_job_and_rack_pair(tmp_path):
    flows = [
        flow("j1", "shuffle", 0, 1, 6 * MB),
        flow("j2", "shuffle", 0, 1, 6 * MB),  # two jobs: no elephant
        flow("j3", "shuffle", 0, 1, 6 * MB),
        flow("j3", "shuffle", 0, 1, 6 * MB),
    ]  # one job: one elephant
    assert totals(tmp_path, flows)["elephant_aggregates"] == 1
    assert totals(tmp_path, flows, elephant_bytes=5 * MB)["elephant_aggregates"] == 3


def test_no_cross_rack_shuffle_has_no_share(tmp_path):
    got = totals(tmp_path, [flow("j1", "shuffle", 0, 0, MB), flow("j1", "input", 0, 1, MB)])
    assert got["shuffle_ocs_share"] is None and got["cross_rack_input_bytes"] == MB
