"""A sweep's plots: one figure per swept field (a field given two or more values), one panel per measure, a line
per setup (and per combination of the other swept fields' values) through the mean over seeds, with the seeds'
range as a band when there are several."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from hybridbed.results.comparison_table import MEASURES

LABELS = {
    **{m.column: m.label.replace(" (x base)", "").replace("{unit}", "bytes") for m in MEASURES},
    "makespan_vs_baseline": "makespan / baseline's",
    "jct_median_vs_baseline": "median JCT / baseline's",
}


def _numeric(values: pd.Series) -> bool:
    return bool(pd.to_numeric(values, errors="coerce").notna().all())


def _label(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _positions(column: pd.Series, values: list, numeric: bool) -> pd.Series:
    """Where a field's values go on the x axis: the number itself, or the value's place in the grid."""
    if numeric:
        return pd.to_numeric(column)
    order = {_label(v): i for i, v in enumerate(values)}
    return column.map(lambda v: order.get(_label(v), len(order)))


def plot_sweep(table: pd.DataFrame, fields: dict[str, list], measures: list[str], out_dir: Path) -> list[Path]:
    """sweep-<field>.png for every swept field with two or more values; returns the files written."""
    done = table[table["status"] == "done"] if "status" in table else table
    written = []
    for field, values in fields.items():
        if len(values) < 2 or done.empty:
            continue
        others = [f for f in fields if f != field and len(fields[f]) > 1]
        fig = Figure(figsize=(5.5, 3.2 * len(measures)))
        axes = fig.subplots(len(measures), 1, squeeze=False)[:, 0]
        numeric = _numeric(pd.Series(values))
        for ax, measure in zip(axes, measures, strict=True):
            for key, lines in done.groupby(["setup", *others], sort=False, dropna=False):
                name = ", ".join(map(_label, key)) if isinstance(key, tuple) else _label(key)
                stats = (
                    lines.assign(
                        _x=_positions(lines[field], values, numeric), _y=pd.to_numeric(lines[measure], errors="coerce")
                    )
                    .groupby("_x")["_y"]
                    .agg(["mean", "min", "max"])
                    .sort_index()
                )
                # a line only between numbers: categories have no order to join them by
                ax.plot(stats.index, stats["mean"], marker="o", linestyle="-" if numeric else "none", label=name)
                if lines["seed"].nunique() > 1:
                    ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.2)
            ax.set_ylabel(LABELS.get(measure, measure))
            if not numeric:
                ax.set_xticks(range(len(values)), [_label(v) for v in values])
            ax.grid(alpha=0.3)
        axes[-1].set_xlabel(field)
        axes[0].legend(fontsize="small")
        fig.tight_layout()
        path = out_dir / f"sweep-{field}.png"
        fig.savefig(path, dpi=120)
        written.append(path)
    return written
