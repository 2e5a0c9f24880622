"""One self-contained HTML page for a comparison or a run (report.html): the table, every plot embedded, each
setup's fidelity verdict, the scenario and the versions it ran with, to attach to a paper's artifact.

It reads only the results directory, so a report can be made again from any past comparison or run,
including an interrupted one (plots a run did not get to draw are drawn first).
"""

from __future__ import annotations

import base64
import html
import json
import time
from pathlib import Path

import pandas as pd

from hybridbed.results.comparison_table import comparison_table, legend
from hybridbed.results.load import read_json
from hybridbed.results.timeline_plots import plot_comparison_timelines, plot_run_timeline

COMPARISON_PLOTS = (
    ("makespan.png", "Makespan per setup"),
    ("jct_cdf.png", "Job completion times"),
    ("ocs_share.png", "Share of cross-rack shuffle bytes on the OCS"),
    ("timelines.png", "Timelines: circuits, uplink utilisation and tasks per phase"),
)
STYLE = """
body { font-family: sans-serif; max-width: 80em; margin: 2em auto; padding: 0 1em; color: #111; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #999; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
img { max-width: 100%; border: 1px solid #ccc; margin: 0.5em 0; }
pre { background: #f4f4f4; padding: 0.8em; overflow-x: auto; font-size: 85%; }
.note { color: #444; font-size: 90%; }
"""


class NotAResultsDirectory(ValueError):
    pass


def write_report(results_dir: Path) -> Path:
    """report.html in results_dir (a comparison's or a single run's); returns its path."""
    if (results_dir / "comparison.csv").is_file():
        page = _comparison_page(results_dir)
    elif (results_dir / "summary.json").is_file():
        page = _run_page(results_dir)
    else:
        raise NotAResultsDirectory(f"{results_dir} holds neither comparison.csv nor summary.json")
    out = results_dir / "report.html"
    out.write_text(page)
    return out


def _comparison_page(results_dir: Path) -> str:
    table = pd.read_csv(results_dir / "comparison.csv")
    setups = [str(s) for s in table.setup]
    run_dirs = [results_dir / s for s in setups if (results_dir / s / "summary.json").is_file()]
    if not (results_dir / "timelines.png").is_file() and run_dirs:
        plot_comparison_timelines(results_dir, setups)
    first = run_dirs[0] if run_dirs else None
    scenario = read_json(first / "scenario.json") if first else {}
    baseline = scenario.get("compare_baseline") or setups[0]
    plots = [(results_dir / name, caption) for name, caption in COMPARISON_PLOTS]
    view = comparison_table(table, baseline)
    return _page(
        title=f"{scenario.get('name', results_dir.name)}: comparison of {', '.join(setups)}",
        table=view,
        legend=legend(view, baseline),
        verdicts={setup: _verdict(results_dir / setup) for setup in setups},
        plots=plots,
        scenario=scenario,
        environment=read_json(first / "environment.json") if first else {},
    )


def _run_page(run_dir: Path) -> str:
    summary = read_json(run_dir / "summary.json")
    scenario = read_json(run_dir / "scenario.json")
    setup = scenario.get("scheduler", {}).get("policy", run_dir.name)
    if not (run_dir / "timeline.png").is_file():
        plot_run_timeline(run_dir)
    view = comparison_table(pd.DataFrame([{"setup": setup, **summary}]), setup)
    return _page(
        title=f"{scenario.get('name', run_dir.name)}: {setup}",
        table=view,
        legend=legend(view, setup),
        verdicts={setup: _verdict(run_dir)},
        plots=[(run_dir / "timeline.png", "Timeline: circuits, uplink utilisation and tasks per phase")],
        scenario=scenario,
        environment=read_json(run_dir / "environment.json"),
    )


def _verdict(run_dir: Path) -> str:
    """A run's fidelity verdict with its reasons, from summary.json."""
    summary = read_json(run_dir / "summary.json")
    if summary.get("backend") == "simulation":
        return "simulation (no emulation fidelity to judge)"
    fidelity = summary.get("fidelity")
    if not isinstance(fidelity, dict):
        return "not recorded"
    reasons = "; ".join(str(r) for r in fidelity.get("reasons", []))
    return f"{fidelity.get('verdict', 'not recorded')}" + (f": {reasons}" if reasons else "")


def _image(path: Path, caption: str) -> str:
    if not path.is_file():
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _page(
    title: str,
    table: pd.DataFrame,
    legend: str,
    verdicts: dict[str, str],
    plots: list[tuple[Path, str]],
    scenario: dict,
    environment: dict,
) -> str:
    verdict_rows = "".join(
        f"<tr><td>{html.escape(setup)}</td><td>{html.escape(verdict)}</td></tr>" for setup, verdict in verdicts.items()
    )
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">report made {time.strftime("%Y-%m-%d %H:%M %Z")} by hybridbed report</p>',
        "<h2>Results</h2>",
        table.to_html(escape=True),
        f'<p class="note">{html.escape(legend)}</p>',
        "<h2>Fidelity</h2>",
        f"<table><tr><th>setup</th><th>verdict</th></tr>{verdict_rows}</table>",
        "<h2>Plots</h2>",
        *(_image(path, caption) for path, caption in plots),
        "<h2>Scenario</h2>",
        f"<pre>{html.escape(json.dumps(scenario, indent=2), quote=False)}</pre>",
        "<h2>Environment</h2>",
        f"<pre>{html.escape(json.dumps(environment, indent=2), quote=False)}</pre>"
        if environment
        else "<p>not recorded</p>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body></html>\n"
    )
