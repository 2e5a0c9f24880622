"""JobPacker against Fair on the real emulated hybrid DCN: one shuffle-heavy job, periodic OCS.

The elephant threshold (3 MB) is above what a rack's two 10 Mb/s hosts can even offer in one 1-second
interval (2.5 MB; the ToR counters see offered load, not just what the 2 Mb/s EPS uplink carries), so
measured demand alone never lights a circuit and Fair's shuffle stays on the EPS. JobPacker plans the
job's reducers so that each rack pair carries 4 MB and hints it, so the OCS carries it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from hybridbed.config.fabric import FRAME_BYTES

from .conftest import run_cli

MB = 1_000_000


# a full frame carries 1448 payload bytes, and every second one is acknowledged by a 66-byte frame
WIRE_BYTES_PER_PAYLOAD_BYTE = (FRAME_BYTES + 66 / 2) / 1448

SHUFFLE_HEAVY = f"job0\t0\t0\t{8 * MB}\t{16 * MB}\t{MB // 2}\n"


def compare(tmp_path, policies: str, steering: str = "all", jobs: str = SHUFFLE_HEAVY) -> tuple[dict, Path]:
    """The scenario (one job unless told) compared under `policies`; the JSON result and the results directory."""
    trace = tmp_path / "jobs.tsv"
    trace.write_text(jobs)
    scenario = {
        "name": "jp",
        "seed": 2,
        "scale": 1.0,
        "fabric": {"racks": 2, "hosts_per_rack": 2},
        "ocs": {
            "mode": "periodic",
            "reconfig_interval_s": 1.0,
            "reconfig_delay_ms": 10,
            "demand_source": "both",
            "elephant_threshold_bytes": 3 * MB,
            "steering": steering,
        },
        "workers": {"slots_per_host": 2, "cores_per_host": 2, "memory_mb_per_host": 1024},
        "workload": {
            "source": "swim",
            "trace": str(trace),
            "jobs": jobs.count("\n"),
            "shape": {
                "block_mb": 1,
                "reduce_input_mb": 4,
                "map_rate_mb_s": 1e6,
                "reduce_rate_mb_s": 1e6,
                "task_overhead_s": 0.5,
            },
        },
        "scheduler": {"heartbeat_timeout_s": 3.0},
        "max_duration_s": 120,
    }
    path = tmp_path / "jp.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "cmp"
    proc = run_cli("compare", str(path), "--policies", policies, "--out", str(out), "--json", timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert all(r["status"] == "done" for r in result.values())
    return result, out


def test_jobpacker_moves_a_shuffle_heavy_job_onto_the_ocs_where_fair_does_not(tmp_path):
    result, out = compare(tmp_path, "fair,jobpacker")
    assert result["jobpacker"]["all_traffic_ocs_share"] >= 0.5, result
    assert result["fair"]["all_traffic_ocs_share"] <= 0.15, result
    assert result["jobpacker"]["reconfigurations"] >= 1
    # JobPacker's reducers sit on both racks, half each, as planned
    tasks = pd.read_csv(out / "jobpacker" / "tasks.csv")
    reduces = tasks[tasks.kind == "reduce"]
    assert sorted(reduces.groupby("rack").size().tolist()) == [2, 2]
    plan = pd.read_csv(out / "jobpacker" / "plan.csv")
    assert plan.job_id.tolist() == ["job0"] and bool(plan.uses_ocs.iloc[0])
    # the run's ocs_demand.csv holds what each of its reconfigurations matched on, on the workload's clock:
    # JobPacker's hints among it, Fair giving none
    events = pd.read_csv(out / "jobpacker" / "ocs_events.csv")
    demand = pd.read_csv(out / "jobpacker" / "ocs_demand.csv")
    sampled = demand.t_s.unique()
    assert all(abs(sampled - t).min() < 2e-6 for t in events.requested_s)
    assert (demand.hinted_bytes > 0).any() and (demand.elephant == 1).any()
    assert (pd.read_csv(out / "fair" / "ocs_demand.csv").hinted_bytes == 0).all()


def test_in_steering_mode_elephant_the_marked_elephant_connections_ride_the_circuit(tmp_path):
    """The shuffle-heavy job's rack pairs carry 4 MB each: elephants, whose connections the workers mark,
    and the controller steers only marked packets; a small job beside it (pairs of 0.25 MB) is never
    marked. That unmarked traffic stays on the EPS under a lit circuit is test_fabric's marked-steering test
    (and the simulator's, tests/unit/test_shuffle_connections.py)."""
    mouse = f"job1\t0\t0\t{2 * MB}\t{MB}\t{MB // 4}\n"
    _, out = compare(tmp_path, "jobpacker", steering="elephant", jobs=SHUFFLE_HEAVY + mouse)
    summary = json.loads((out / "jobpacker" / "summary.json").read_text())
    flows = pd.read_csv(out / "jobpacker" / "flows.csv")
    elephants = flows[(flows.src_rack != flows.dst_rack) & (flows.elephant == 1)]
    assert set(flows[flows.elephant == 1].job_id) == {"job0"} and summary["reconfigurations"] >= 1
    # The circuits carried the marked connections' bytes (the planned pairs' from their first byte): at least
    # half, as a marked connection takes the EPS until its circuit lights; at most those bytes in full frames
    # with their acknowledgements, plus every segment the run's hosts sent again (what a reconfiguration drops
    # on a circuit is resent: 5-17 % of the segments measured).
    wire = WIRE_BYTES_PER_PAYLOAD_BYTE * elephants.bytes.sum()
    resent = summary["fidelity"]["tcp"]["retransmitted"] * FRAME_BYTES
    assert 0.5 * elephants.bytes.sum() <= summary["ocs_uplink_bytes"] <= wire + resent, (wire, resent)
    # The bytes each connection's notes put on the circuits (what it received while its pair was lit) are what
    # the OCS uplinks sent, in full frames, within the segments sent again and 5 % for the notes' spacing; the
    # acknowledgements are not marked, so they take the EPS.
    noted = elephants.ocs_bytes.sum() * FRAME_BYTES / 1448
    assert 0.95 * (summary["ocs_uplink_bytes"] - resent) <= noted <= 1.05 * summary["ocs_uplink_bytes"], noted
