"""Progress where the CLI's output goes to a log file: plain lines, not a live display."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from rich.console import Console

import hybridbed.cli as cli

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
LINE = re.compile(r"^\d\d:\d\d:\d\d (\S+): (.*)$")


def test_a_compare_into_a_log_file_gives_each_setup_a_progress_line_and_an_end_line(tmp_path, capsys):
    argv = ["compare", str(QUICKSTART), "--backend", "simulation", "--policies", "fair,jobpacker", "--workers", "1"]
    assert cli.main([*argv, "--out", str(tmp_path / "c")]) == 0
    lines = [m.groups() for m in map(LINE.match, capsys.readouterr().err.splitlines()) if m]
    # one after another, each reported as it goes (at its first report; the next would be a minute later)
    assert [setup for setup, _ in lines] == ["fair", "fair", "jobpacker", "jobpacker"]
    assert re.fullmatch(r"\d+/12 jobs, workload at \d+ s, \d+ tasks running", lines[0][1])
    for setup, ended in lines[1::2]:  # simulated: no fidelity verdict
        makespan = json.loads((tmp_path / "c" / setup / "summary.json").read_text())["makespan_s"]
        assert ended == f"done, 12/12 jobs, makespan {makespan:.1f} s", setup


def test_lines_are_a_minute_apart_per_run_and_an_end_is_always_told(capsys):
    clock = iter([0.0, 30.0, 59.0, 61.0, 62.0, 63.0])
    lines = cli.ProgressLines(lambda: next(clock))
    for run, text in [("a", "a 1"), ("a", "a 2"), ("b", "b 1"), ("a", "a 3")]:
        lines.tell(run, text)
    lines.tell("a", "a ended", ended=True)
    lines.tell("a", "a again")  # a run of the same name after the end starts afresh
    told = [line.split(" ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert told == ["a 1", "b 1", "a 3", "a ended", "a again"]


def test_a_terminal_gets_no_lines_its_live_display_shows_the_progress(monkeypatch):
    terminal = Console(file=io.StringIO(), force_terminal=True)
    monkeypatch.setattr(cli, "console", terminal)
    cli.ProgressLines().tell("a", "a 1", ended=True)
    assert terminal.file.getvalue() == ""
