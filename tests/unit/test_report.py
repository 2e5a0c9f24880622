"""`hybridbed report`: one self-contained HTML page from a real (simulated) comparison's results, and from one
of its runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from hybridbed.experiments.comparison import compare
from hybridbed.experiments.scenarios import load_scenario

REPO = Path(__file__).resolve().parents[2]


def hybridbed(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hybridbed.cli", *args], capture_output=True, text=True, timeout=120)


def test_the_report_holds_every_setup_its_plots_scenario_and_versions_and_needs_nothing_beside_it(tmp_path):
    scenario = load_scenario(REPO / "scenarios" / "quickstart.yaml", {"backend": "simulation"})
    setups = ["fair", "jobpacker", "f-eps"]
    table = compare(scenario, setups, tmp_path / "cmp")
    (tmp_path / "cmp" / "timelines.png").unlink()  # as after an interrupted comparison: the report draws it
    done = hybridbed("report", str(tmp_path / "cmp"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "cmp" / "report.html").read_text()
    header = re.search(r"<thead>(.*?)</thead>", page, re.S)
    assert header is not None and re.findall(r"<th>([^<]+)</th>", header.group(1)) == setups
    makespans = [f"{m:.1f}" for m in table.makespan_s]
    assert all(m in page for m in makespans)
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 4 and all(len(i) > 5_000 for i in images)  # the three comparison plots and the timelines
    assert not re.search(r'src="(?!data:)', page) and "<link" not in page  # nothing outside the page
    assert '"name": "quickstart"' in page and '"numpy"' in page  # the scenario and the environment
    assert page.count("simulation (no emulation fidelity to judge)") == len(setups)

    run = tmp_path / "cmp" / "jobpacker"
    shutil.copytree(run, tmp_path / "alone")
    (tmp_path / "alone" / "timeline.png").unlink()
    assert hybridbed("report", str(tmp_path / "alone")).returncode == 0
    alone = (tmp_path / "alone" / "report.html").read_text()
    assert f"{table.makespan_s[1]:.1f}" in alone and len(re.findall(r"data:image/png;base64", alone)) == 1


def test_a_directory_without_results_is_refused_by_name(tmp_path):
    done = hybridbed("report", str(tmp_path))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and "holds neither comparison.csv nor summary.json" in said
    assert not (tmp_path / "report.html").exists()
