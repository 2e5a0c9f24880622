"""Timeline plots: a run's timeline.png, and a comparison's timelines.png with its setups side by side.

Four panels share the time axis: the circuits (a row per rack pair, a bar while its circuit carried traffic,
a tick where a reconfiguration's dark time began), the EPS and the OCS uplink utilisation per rack (grey
scale, white idle to black full), and the tasks running per phase. Everything is drawn in grey levels,
hatches and line styles, so a black-and-white print reads the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hybridbed.config.fabric import FabricSpec
from hybridbed.results.load import RunResults, load, read_table
from hybridbed.results.timeline import PHASES, circuit_timeline, run_end_s, running_by_phase, uplink_utilisation

MAX_CIRCUIT_ROWS = 30  # rack pairs drawn; at paper scale thousands of pairs get a circuit at some time
PHASE_STYLES = {"map": ("0.0", "-"), "shuffle": ("0.35", "--"), "reduce": ("0.6", ":")}  # grey level, line style
PANEL_HEIGHTS = (3.0, 2.0, 2.0, 2.0)  # inches: circuits, EPS uplinks, OCS uplinks, tasks
COLUMN_WIDTH_IN = 4.5
# what the panels draw from: these tables, and of flows.csv when each reducer's fetches ended (a paper-scale run has
# millions of flows, gigabytes read whole: the columns are read one run at a time, as its tasks are drawn)
DRAWN = {"tasks": None, "links": None, "ocs_events": None}
FETCH_ENDS = ["task_id", "attempt", "kind", "end_s"]


def plot_run_timeline(run_dir: Path) -> Path:
    """timeline.png in the run's directory; returns its path."""
    return _plot([run_dir], run_dir / "timeline.png", titles=[_title(run_dir)])


def plot_comparison_timelines(out_dir: Path, setups: list[str]) -> Path | None:
    """timelines.png in the comparison's directory: the setups' timelines side by side on one time scale
    (a setup without results is left out; None when none has any)."""
    runs = [out_dir / setup for setup in setups if (out_dir / setup / "summary.json").is_file()]
    if not runs:
        return None
    return _plot(runs, out_dir / "timelines.png", titles=[run.name for run in runs])


def _title(run_dir: Path) -> str:
    summary = json.loads((run_dir / "summary.json").read_text())
    scenario = json.loads((run_dir / "scenario.json").read_text())
    return f"{scenario['name']}: {scenario['scheduler']['policy']} ({summary.get('backend', scenario['backend'])})"


def _plot(run_dirs: list[Path], out: Path, titles: list[str]) -> Path:
    runs = [load(run_dir, DRAWN) for run_dir in run_dirs]
    end = max(run_end_s(run.tasks, run.links, run.ocs_events) for run in runs) or 1.0
    fig = Figure(figsize=(COLUMN_WIDTH_IN * len(runs) + 1.0, sum(PANEL_HEIGHTS)), layout="constrained")
    axes = fig.subplots(
        len(PANEL_HEIGHTS), len(runs), squeeze=False, sharex=True, gridspec_kw={"height_ratios": PANEL_HEIGHTS}
    )
    heatmaps = []
    for column, (run, title) in enumerate(zip(runs, titles, strict=True)):
        ax_circuits, ax_eps, ax_ocs, ax_tasks = axes[:, column]
        ax_circuits.set_title(title)
        _draw_circuits(ax_circuits, run, end)
        fabric = FabricSpec.model_validate(_scenario(run)["fabric"])
        utilisation = uplink_utilisation(run.links, fabric.eps_uplink_mbps, fabric.ocs_rate_mbps)
        for ax, kind in ((ax_eps, "eps"), (ax_ocs, "ocs")):
            heatmaps += _draw_utilisation(ax, utilisation.get(kind), kind.upper(), fabric.racks)
        _draw_tasks(ax_tasks, run)
        ax_tasks.set_xlabel("time since the workload began (s)")
        ax_tasks.set_xlim(0, end)
    for row in axes[[0, 3]]:  # one legend per row, outside the last column
        handles = next((ax.get_legend_handles_labels() for ax in row if ax.get_legend_handles_labels()[0]), None)
        if handles:
            row[-1].legend(*handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, frameon=False)
    if heatmaps:
        fig.colorbar(heatmaps[0], ax=axes[1:3, -1].tolist(), label="uplink utilisation (share of capacity)")
    top = max(ax.get_ylim()[1] for ax in axes[3])
    for ax in axes[3]:
        ax.set_ylim(0, top)
    fig.savefig(out, dpi=110)
    return out


def _scenario(run: RunResults) -> dict:
    return json.loads((run.path / "scenario.json").read_text())


def _draw_circuits(ax: Axes, run: RunResults, end: float) -> None:
    if run.ocs_events.empty:
        ax.text(0.5, 0.5, "no circuits", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
        ax.set_ylabel("circuits")
        return
    timeline = circuit_timeline(run.ocs_events, end)
    pairs = timeline.pairs_by_time_lit()
    shown = pairs[:MAX_CIRCUIT_ROWS]
    row = {pair: i for i, pair in enumerate(shown)}
    for pair, spans in timeline.lit[timeline.lit.pair.isin(shown)].groupby("pair"):
        ax.broken_barh(
            list(zip(spans.from_s, spans.until_s - spans.from_s, strict=True)),
            (row[pair] - 0.4, 0.8),
            facecolors="0.6",
            edgecolors="0.3",
            linewidth=0.3,
        )
    dark = timeline.dark[timeline.dark.pair.isin(shown)]
    ax.scatter(
        dark.from_s,
        dark.pair.map(row),
        marker="|",
        s=60,
        color="0.0",
        linewidths=1.0,
        label="a reconfiguration's\ndark time begins",
    )
    ax.set_yticks(range(len(shown)), shown, fontsize=6 if len(shown) > 12 else 8)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    more = f"; {len(pairs) - len(shown)} more not shown" if len(pairs) > len(shown) else ""
    ax.set_ylabel(f"circuit (rack pair){more}")


def _draw_utilisation(ax: Axes, utilisation: pd.DataFrame | None, kind: str, racks: int) -> list:
    ax.set_ylabel(f"{kind} uplink, rack")
    if utilisation is None or len(utilisation) < 2:  # a single sample opens no interval
        ax.text(
            0.5,
            0.5,
            f"no {kind} uplinks" if utilisation is None else "no samples",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_yticks([])
        return []
    intervals = utilisation.iloc[1:].reindex(columns=range(racks))  # the first sample only opens the first interval
    mesh = ax.pcolormesh(
        utilisation.index, range(racks + 1), intervals.T.to_numpy(), cmap="Greys", vmin=0.0, vmax=1.0, shading="flat"
    )
    ax.set_ylim(racks, 0)
    ticks = range(0, racks, max(1, racks // 8))
    ax.set_yticks([t + 0.5 for t in ticks], [str(t) for t in ticks])
    return [mesh]


def _draw_tasks(ax: Axes, run: RunResults) -> None:
    running = running_by_phase(run.tasks, read_table(run.path / "flows.csv", FETCH_ENDS))
    for phase in PHASES:
        grey, style = PHASE_STYLES[phase]
        if not running.empty:
            ax.step(running.index, running[phase], where="post", color=grey, linestyle=style, label=phase)
    ax.set_ylabel("tasks running")
