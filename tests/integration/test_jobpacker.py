"""JobPacker against Fair on the real emulated hybrid DCN: one shuffle-heavy job, periodic OCS.

The elephant threshold (3 MB) is above what a rack's two 10 Mb/s hosts can even offer in one 1-second
interval (2.5 MB; the ToR counters see offered load, not just what the 2 Mb/s EPS uplink carries), so
measured demand alone never lights a circuit and Fair's shuffle stays on the EPS. JobPacker plans the
job's reducers so that each rack pair carries 4 MB and hints it, so the OCS carries it."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import yaml

MB = 1_000_000


def test_jobpacker_moves_a_shuffle_heavy_job_onto_the_ocs_where_fair_does_not(tmp_path):
    trace = tmp_path / "jobs.tsv"
    trace.write_text(f"job0\t0\t0\t{8 * MB}\t{16 * MB}\t{MB // 2}\n")
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
        },
        "workers": {"slots_per_host": 2, "cores_per_host": 2, "memory_mb_per_host": 1024},
        "workload": {
            "source": "swim",
            "trace": str(trace),
            "jobs": 1,
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
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hybridbed.cli",
            "compare",
            str(path),
            "--policies",
            "fair,jobpacker",
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert all(r["status"] == "done" for r in result.values())
    assert result["jobpacker"]["all_traffic_ocs_share"] >= 0.5, result
    assert result["fair"]["all_traffic_ocs_share"] <= 0.15, result
    assert result["jobpacker"]["reconfigurations"] >= 1
    # JobPacker's reducers sit on both racks, half each, as planned
    tasks = pd.read_csv(out / "jobpacker" / "tasks.csv")
    reduces = tasks[tasks.kind == "reduce"]
    assert sorted(reduces.groupby("rack").size().tolist()) == [2, 2]
    plan = pd.read_csv(out / "jobpacker" / "plan.csv")
    assert plan.job_id.tolist() == ["job0"] and bool(plan.uses_ocs.iloc[0])
