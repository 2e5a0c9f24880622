"""Past runs and comparisons are found under a results directory, newest first, a comparison's setups with it."""

from __future__ import annotations

import json
import os

import pandas as pd

from hybridbed.cli import main
from hybridbed.results.index import find_results


def write_run(
    directory, policy: str, makespan: float | None, status: str = "done", mtime: float = 0.0, verdict: str | None = None
) -> None:
    directory.mkdir(parents=True)
    (directory / "scenario.json").write_text(
        json.dumps({"name": "quick", "backend": "simulation", "scheduler": {"policy": policy}})
    )
    summary = {"status": status, "makespan_s": makespan}
    if verdict is not None:
        summary["fidelity"] = {"verdict": verdict, "reasons": []}
    (directory / "summary.json").write_text(json.dumps(summary))
    os.utime(directory / "summary.json", (mtime, mtime))


def test_runs_and_comparisons_are_listed_newest_first(tmp_path, capsys):
    write_run(tmp_path / "old-run", "fair", 60.0, mtime=1_000)
    compared = tmp_path / "quick-compare"
    write_run(compared / "fair", "fair", 53.3, verdict="warn")
    write_run(compared / "jobpacker", "jobpacker", None, status="failed: the scheduler exited")
    pd.DataFrame(
        {"setup": ["fair", "jobpacker"], "status": ["done", "failed: the scheduler exited"], "makespan_s": [53.3, None]}
    ).to_csv(compared / "comparison.csv", index=False)
    os.utime(compared / "comparison.csv", (2_000, 2_000))
    entries = find_results(tmp_path)
    assert [(e.kind, e.path) for e in entries] == [("comparison", str(compared)), ("run", str(tmp_path / "old-run"))]
    comparison, run = entries
    assert comparison.setups == ["fair", "jobpacker"] and comparison.makespans_s == {"fair": 53.3, "jobpacker": None}
    assert comparison.status == "failed: the scheduler exited" and comparison.scenario == "quick"
    assert comparison.verdicts == {"fair": "warn", "jobpacker": None}
    assert run.makespans_s == {"fair": 60.0} and run.backend == "simulation"
    assert find_results(tmp_path / "nowhere") == []
    assert main(["results", str(tmp_path), "--json"]) == 0
    assert [e["kind"] for e in json.loads(capsys.readouterr().out)] == ["comparison", "run"]


def test_a_sweep_is_one_entry_with_its_runs_and_says_how_many_are_done(tmp_path):
    sweep = tmp_path / "quick-sweep"
    write_run(sweep / "runs" / "fair-seed1-a", "fair", 50.0)
    write_run(sweep / "runs" / "fair-seed1-b", "fair", 70.0)
    write_run(sweep / "incomplete" / "jobpacker-seed1-a-1", "jobpacker", None, status="interrupted")
    record = {"scenario": {"name": "quick"}, "grid": {}, "backend": "simulation", "points": 4}
    (sweep / "sweep.json").write_text(json.dumps(record))
    pd.DataFrame(
        {
            "point": ["fair-seed1-a", "fair-seed1-b"],
            "setup": ["fair", "fair"],
            "status": ["done", "done"],
            "makespan_s": [50.0, 70.0],
        }
    ).to_csv(sweep / "sweep.csv", index=False)
    write_run(tmp_path / "lone-run", "fair", 60.0, mtime=1_000)
    entries = find_results(tmp_path)
    assert [(e.kind, e.path) for e in entries] == [("sweep", str(sweep)), ("run", str(tmp_path / "lone-run"))]
    assert entries[0].status == "2 of 4 runs done" and entries[0].makespans_s == {"fair": 60.0}
    record["points"] = 2
    (sweep / "sweep.json").write_text(json.dumps(record))
    assert find_results(tmp_path)[0].status == "done"
