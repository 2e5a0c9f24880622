"""A comparison's plots: makespan and the OCS share of cross-rack shuffle bytes per setup, and the JCT
distribution of every setup."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure


def plot_comparison(table: pd.DataFrame, jcts: dict[str, pd.Series], out_dir: Path) -> None:
    """makespan.png (bars), jct_cdf.png (one CDF per setup), ocs_share.png (bars)."""
    done = table.dropna(subset=["makespan_s"])
    for column, name, label in (
        ("makespan_s", "makespan.png", "makespan (s)"),
        ("shuffle_ocs_share", "ocs_share.png", "share of cross-rack shuffle bytes on the OCS"),
    ):
        fig = Figure(figsize=(5, 3.5))
        ax = fig.subplots()
        ax.bar(done["setup"], done[column].astype(float))
        ax.set_ylabel(label)
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=120)
    fig = Figure(figsize=(5, 3.5))
    ax = fig.subplots()
    for setup, jct in jcts.items():
        values = jct.sort_values().to_numpy()
        if len(values):
            ax.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post", label=setup)
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of jobs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "jct_cdf.png", dpi=120)
