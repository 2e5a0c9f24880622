"""`hybridbed compare` on a small scenario: every setup runs the same jobs, and one table and the timelines come
out."""

from __future__ import annotations

import json

import pandas as pd

from .conftest import run_cli


def test_compare_runs_each_setup_on_the_same_jobs(tmp_path, small_scenario, scenario_file):
    path = scenario_file(small_scenario(jobs=2))
    out = tmp_path / "cmp"
    proc = run_cli("compare", str(path), "--policies", "fair,f-eps", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert set(result) == {"fair", "f-eps"}
    for setup in result.values():
        assert setup["status"] == "done" and setup["jobs_done"] == 2
        assert setup["makespan_s"] > 0 and setup["jct_median_s"] > 0 and setup["jct_p95_s"] >= setup["jct_median_s"]
    assert result["fair"]["makespan_vs_baseline"] == 1.0 == result["fair"]["jct_median_vs_baseline"]
    assert result["f-eps"]["all_traffic_ocs_share"] == 0  # no OCS in f-eps
    jobs = {s: pd.read_csv(out / s / "jobs.csv").set_index("job_id") for s in result}
    assert jobs["fair"]["shuffle_bytes"].to_dict() == jobs["f-eps"]["shuffle_bytes"].to_dict()
    assert (out / "comparison.csv").exists() and (out / "jct_cdf.png").exists()
    assert (out / "timelines.png").exists()
    for setup in result:  # the timeline's uplink utilisation comes from the switches' counters
        links = pd.read_csv(out / setup / "links.csv")
        assert (out / setup / "timeline.png").exists() and links.tx_bytes.max() > 0
        assert links.time_s.min() < 0 < links.time_s.max()  # a sample from before the workload, then during it
    report = run_cli("report", str(out), timeout=120)
    assert report.returncode == 0
    page = (out / "report.html").read_text()
    assert all(f"<th>{setup}</th>" in page for setup in result) and '"open_vswitch"' in page
